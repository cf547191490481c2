# Runs inside the engine image (python -c): which NCCL its torch uses, as JSON.
# A CUDA torch reports the NCCL it loads; a CPU build has none, so the pip
# metadata of the nvidia-nccl wheels (if any) is what there is to report.
import contextlib
import importlib.metadata
import json

found = {"torch_nccl": None, "packages": {}}
for name in ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl"):
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        found["packages"][name] = importlib.metadata.version(name)
try:
    import torch

    if torch.version.cuda:
        found["torch_nccl"] = ".".join(str(part) for part in torch.cuda.nccl.version())
except Exception as error:  # any failure is reported: the role decides
    found["error"] = repr(error)
print(json.dumps(found))
