#!/usr/bin/env python
"""Benchmark (not a test): what the venv's bytecode, written at install, saves the controller's processes.

`make` installs the venv with `uv pip install --compile-bytecode`. Without it (uv's default) no file of the venv
has bytecode, and where PYTHONDONTWRITEBYTECODE is set (the build machines) none is ever written: every process
compiles from source each file it imports. This runs each workload in turns with the venv's bytecode hidden (the
baseline: PYTHONPYCACHEPREFIX at an empty directory, where Python then looks for bytecode and finds none) and
seen, and prints each run's CPU seconds (the process and every process it waited for), then the ratio of the
medians. Needs no cluster: the refused run stops at its input check, before any node is reached.

Workloads: a refused `site.yml` (`-e lane=300k`: one ansible-playbook start, its first play), importing vLLM's
`vllm serve` parser (as the unit tests and the engine role's argv check do), and, with --unit, the unit tests.
Usage: benchmarks/controller_bytecode.py [--rounds 2] [--unit]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from engine_rerun import INVENTORY, REPO
from filter_preload import controller_cpu_seconds

BIN = REPO / ".venv" / "bin"

WORKLOADS = {
    "refused site.yml (-e lane=300k)": (
        [str(BIN / "ansible-playbook"), "-i", str(INVENTORY), str(REPO / "site.yml"), "-e", "lane=300k"],
        "Unknown lane '300k'",
    ),
    "import vLLM's serve parser": ([str(BIN / "python"), "-c", "import vllm.entrypoints.cli.serve"], None),
}
UNIT = ([str(BIN / "pytest"), "-q", "-p", "no:cacheprovider", "tests/unit"], None)


def run(command: list[str], expected: str | None, hidden_in: str | None) -> float:
    """CPU s of one run; the bytecode hidden when hidden_in names an empty directory."""
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}", ANSIBLE_NOCOLOR="1", PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPYCACHEPREFIX", None)
    if hidden_in:
        env["PYTHONPYCACHEPREFIX"] = hidden_in
    before = controller_cpu_seconds()
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    spent = controller_cpu_seconds() - before
    output = result.stdout + result.stderr
    if (expected is None and result.returncode != 0) or (expected is not None and expected not in output):
        sys.exit(f"{' '.join(command)}: not the expected outcome (rc {result.returncode}):\n{output[-3000:]}")
    return spent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="pairs of runs of each workload, without then with the bytecode")
    parser.add_argument("--unit", action="store_true", help="also the unit tests (about 1.5-2.5 CPU minutes a run)")
    args = parser.parse_args()
    workloads = dict(WORKLOADS, **({"unit tests": UNIT} if args.unit else {}))
    with tempfile.TemporaryDirectory(prefix="no-bytecode-") as empty:
        for name, (command, expected) in workloads.items():
            spent: dict[bool, list[float]] = {False: [], True: []}
            for _round in range(args.rounds):
                for seen in (False, True):
                    spent[seen].append(run(command, expected, None if seen else empty))
                    print(f"{name}, bytecode {'seen  ' if seen else 'hidden'}: {spent[seen][-1]:6.1f} CPU s", flush=True)
            hidden, seen = statistics.median(spent[False]), statistics.median(spent[True])
            print(f"{name}: median {hidden:.1f} CPU s hidden, {seen:.1f} seen: {seen / hidden:.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
