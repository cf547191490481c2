"""The simulated nodes' bytecode cache for what Ansible's modules import from their AnsiballZ zip.

Simulation only (the node image installs it; the collection never does). Python compiles every file it
imports from a zip archive and keeps no bytecode for it, so each task on a node compiles
ansible.module_utils.basic and the module again: ~60 ms of CPU per task. A Spark pays that on its own 20
cores; the four simulated nodes share the build machine's two, where it is a third of a module's run.

This keeps each compiled file under the sha256 of Python's magic number, its optimization level and the file's
source, in a directory of the running user's own. A hit is the code object compile() made for the same bytes,
with its file name set to the importing zip's path, as importlib does for a .pyc; so a module runs, and fails,
as without the cache.
Only zipimport's compile is wrapped: nothing imported from a directory is touched.
"""

import os  # loaded before any .pth is read, as zipimport is
import zipimport

# Each user's cache is CACHE_ROOT/sim-bytecode-UID.
CACHE_ROOT = "/var/tmp"

_compile_source = zipimport._compile_source


def _own_directory():
    """This user's cache directory, made if missing; None where another user owns that name or it cannot be made."""
    directory = os.path.join(CACHE_ROOT, f"sim-bytecode-{os.getuid()}")
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        return directory if os.stat(directory).st_uid == os.getuid() else None
    except OSError:
        return None


def _cached_compile_source(pathname, source):
    # Imported at the first compile, not at every Python start on the node.
    import _imp
    import hashlib
    import importlib.util
    import marshal
    import sys

    directory = _own_directory()
    if directory is None:
        return _compile_source(pathname, source)
    # compile() strips asserts under -O: the level is part of what the code is.
    key = hashlib.sha256(importlib.util.MAGIC_NUMBER + bytes([sys.flags.optimize]) + source).hexdigest()
    cached = os.path.join(directory, key)
    try:
        with open(cached, "rb") as handle:
            code = marshal.load(handle)
    except (OSError, EOFError, ValueError, TypeError):
        code = _compile_source(pathname, source)
        scratch = f"{cached}.{os.getpid()}"
        try:
            with open(scratch, "wb") as handle:
                marshal.dump(code, handle)
            os.replace(scratch, cached)  # whole or absent: tasks run side by side
        except OSError:
            pass
        return code
    _imp._fix_co_filename(code, pathname)
    return code


zipimport._compile_source = _cached_compile_source
