"""The simulated nodes' bytecode cache (molecule/resources/images/node/sim_bytecode_cache.py), in a fresh Python each
time, as a node's Python runs a task: a module imported from a zip runs the same with it, a hit names the zip
it was imported from, and a directory that is not the user's own is neither read nor written."""

from __future__ import annotations

import hashlib
import importlib.util
import marshal
import os
import pathlib
import subprocess
import sys
import zipfile

import pytest

HOOK = pathlib.Path(__file__).resolve().parents[2] / "molecule/resources/images/node"

PROBE = """
ANSWER = 6 * 7


def fail():
    raise RuntimeError("from the probe")
"""

# Imports the probe from the zip with the hook loaded (as the node's .pth loads it), then prints the answer and
# the file the probe's traceback names.
RUN = """
import sys, traceback
import sim_bytecode_cache
sim_bytecode_cache.CACHE_ROOT = sys.argv[2]
sys.path.insert(0, sys.argv[1])
import probe
print(probe.ANSWER)
try:
    probe.fail()
except RuntimeError as error:
    print(traceback.extract_tb(error.__traceback__)[-1].filename)
"""


def _zip(path: pathlib.Path) -> pathlib.Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("probe.py", PROBE)
    return path


def _import_from(archive: pathlib.Path, cache_root: pathlib.Path) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", RUN, str(archive), str(cache_root)],
        env={**os.environ, "PYTHONPATH": str(HOOK)}, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return result.stdout.split()


def test_a_second_import_from_another_zip_is_a_hit_that_names_that_zip(tmp_path):
    cache = tmp_path / "cache"
    first = _import_from(_zip(tmp_path / "first.zip"), cache)
    assert first == ["42", str(tmp_path / "first.zip" / "probe.py")]
    kept = list((cache / f"sim-bytecode-{os.getuid()}").iterdir())
    assert [len(path.name) for path in kept] == [64], kept  # one file, named by its sha256, no scratch left
    stamp = kept[0].stat().st_mtime_ns

    second = _import_from(_zip(tmp_path / "second.zip"), cache)
    assert second == ["42", str(tmp_path / "second.zip" / "probe.py")]  # the hit's code names the zip it came from
    assert kept[0].stat().st_mtime_ns == stamp  # read, not compiled and written again


def test_changed_source_is_compiled_again_not_taken_from_the_cache(tmp_path):
    cache = tmp_path / "cache"
    _import_from(_zip(tmp_path / "first.zip"), cache)
    changed = tmp_path / "changed.zip"
    with zipfile.ZipFile(changed, "w") as archive:
        archive.writestr("probe.py", PROBE.replace("6 * 7", "6 * 8"))
    assert _import_from(changed, cache)[0] == "48"
    assert len(list((cache / f"sim-bytecode-{os.getuid()}").iterdir())) == 2


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root (CI runs as root)")
def test_a_directory_another_user_owns_is_neither_read_nor_written(tmp_path):
    cache = tmp_path / "cache"
    directory = cache / f"sim-bytecode-{os.getuid()}"
    directory.mkdir(parents=True)
    os.chown(directory, 12345, 12345)
    assert _import_from(_zip(tmp_path / "first.zip"), cache)[0] == "42"
    assert list(directory.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root (CI runs as root)")
def test_code_left_in_a_directory_another_user_owns_is_not_run(tmp_path):
    cache = tmp_path / "cache"
    directory = cache / f"sim-bytecode-{os.getuid()}"
    directory.mkdir(parents=True)
    planted = compile(PROBE.replace("6 * 7", "0"), "planted", "exec")
    key = hashlib.sha256(importlib.util.MAGIC_NUMBER + bytes([sys.flags.optimize]) + PROBE.encode()).hexdigest()
    (directory / key).write_bytes(marshal.dumps(planted))
    assert _import_from(_zip(tmp_path / "first.zip"), cache)[0] == "0"  # the user's own: taken, so the key is right
    os.chown(directory, 12345, 12345)
    assert _import_from(_zip(tmp_path / "second.zip"), cache)[0] == "42"
