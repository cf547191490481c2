"""Fill, at image build time, the caches every rank would otherwise fill at boot.

vLLM inspects a model class in a *subprocess* (a second import of vLLM and
torch, ~25 s of CPU here) unless `$VLLM_CACHE_ROOT/modelinfos` already holds
the answer for that class's source file. A rank's container starts from the
image every time, so without this the cost is paid by every rank of every
launch. The cache entry is keyed by the hash of the model's source file: a
patched file mounted over it makes vLLM inspect it again, as it should.

Usage: python warm_caches.py ARCHITECTURE [ARCHITECTURE ...]
       (inside the environment that has vLLM, with VLLM_CACHE_ROOT set)
"""

import os
import pathlib
import sys


def main(architectures: list[str]) -> int:
    from vllm.model_executor.models.registry import ModelRegistry

    for architecture in architectures:
        if ModelRegistry._try_inspect_model_cls(architecture) is None:
            print(f"warm_caches: vLLM does not know the architecture {architecture}", file=sys.stderr)
            return 1
    cached = sorted(path.name for path in (pathlib.Path(os.environ["VLLM_CACHE_ROOT"]) / "modelinfos").glob("*.json"))
    print("warm_caches: model info cached for " + ", ".join(cached))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["LlamaForCausalLM"]))
