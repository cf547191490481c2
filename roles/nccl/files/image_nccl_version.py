# Runs inside the engine image (python -c): which NCCL its torch uses, as JSON.
# "nccl" is what ncclGetVersion of the library this process mapped answers: the NCCL every rank
# of this image loads. torch.cuda.nccl.version() ("torch_nccl") is only the version torch was
# compiled against (a constant from NCCL's headers), which an image that re-pins NCCL, as the
# recipe's does, no longer loads. The library file (path and sha256) is reported too. A CPU build
# maps none: the pip wheels' library, if any, is loaded to ask it.
import contextlib
import ctypes
import hashlib
import importlib.metadata
import json


def library_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return {"path": path, "sha256": digest.hexdigest()}


def mapped_nccl():
    # The libnccl this process has mapped (torch loads it with libtorch_cuda).
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            if "/libnccl" in path and ".so" in path:
                return path
    return None


def packaged_nccl(name):
    for entry in importlib.metadata.files(name) or []:
        if "/libnccl" in "/" + str(entry) and ".so" in str(entry):
            return str(entry.locate())
    return None


def nccl_get_version(path):
    """ncclGetVersion of the library at path: "2.30.7" (NCCL >= 2.9 codes 23007; older ones 2804)."""
    code = ctypes.c_int(0)
    status = ctypes.CDLL(path).ncclGetVersion(ctypes.byref(code))
    if status != 0:
        raise RuntimeError(f"ncclGetVersion returned {status}")
    major, rest = (code.value // 10000, code.value % 10000) if code.value >= 10000 else (code.value // 1000, code.value % 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


found = {"nccl": None, "torch_nccl": None, "packages": {}, "library": None}
for name in ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl"):
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        found["packages"][name] = importlib.metadata.version(name)
try:
    import torch

    if torch.version.cuda:
        found["torch_nccl"] = ".".join(str(part) for part in torch.cuda.nccl.version())
except Exception as error:  # any failure is reported: the role decides
    found["error"] = repr(error)
try:
    path = mapped_nccl() or next(filter(None, map(packaged_nccl, found["packages"])), None)
    if path:
        found["library"] = library_file(path)
        found["nccl"] = nccl_get_version(path)
except Exception as error:
    found["library_error"] = repr(error)
print(json.dumps(found))
