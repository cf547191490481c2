"""Let the cpu image's ranks fork their worker instead of spawning it.

vLLM's CPU platform forces VLLM_WORKER_MULTIPROC_METHOD=spawn, so every rank
imports vLLM and torch twice (the worker re-imports everything): on the
simulated cluster, four ranks on two shared cores, that second import was
~20 s of every boot. This turns the forced value into a default, so the cpu
profile's environment can choose fork (with OMP_NUM_THREADS=1: a forked worker
keeps the parent's OpenMP settings, and more threads than cores made decoding
5x slower). Run at image build time; fails when vLLM's line is not there, so a
vLLM upgrade cannot silently drop it. The gb10 image is not touched.
"""

from __future__ import annotations

import pathlib
import sys

import vllm.platforms

FORCED = 'os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"'
DEFAULT = 'os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")'


def main() -> int:
    path = pathlib.Path(vllm.platforms.__file__).with_name("cpu.py")
    source = path.read_text()
    if source.count(FORCED) != 1:
        print(f"allow_fork: {path} does not force spawn the way vLLM 0.32 does ({FORCED!r}); update this script", file=sys.stderr)
        return 1
    path.write_text(source.replace(FORCED, DEFAULT))
    print(f"allow_fork: {path}: the worker start method is now a default (VLLM_WORKER_MULTIPROC_METHOD)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
