# Runs inside the engine image (python -c): which NCCL its torch uses, as JSON.
# A CUDA torch reports the NCCL it loads, and the library file it mapped (path and
# sha256: the bytes every rank of this image loads). A CPU build has none, so the
# pip metadata of the nvidia-nccl wheels (if any) and their library file are what
# there is to report.
import contextlib
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


found = {"torch_nccl": None, "packages": {}, "library": None}
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
except Exception as error:
    found["library_error"] = repr(error)
print(json.dumps(found))
