#!/usr/bin/env python
"""Benchmark (not a test): a cold boot against warm relaunches, with vLLM's compilation on, on the simulated cluster.

Deploys the compile-enabled cpu engine (images/engine-cpu-compile: the cpu image with a C++ compiler and
torch.compile on, not eager), then measures in one run, each as the readiness timeline's first streamed token
(seconds after the first rank's container started):

  1. cold boot: every node's image caches emptied first;
  2. warm relaunch of the same lane (engine_force_relaunch);
  3. relaunch into another lane;
  4. relaunch after the image changed (another image ID, same contents): cold again, no artifact of the first used;

and prints each as a ratio to the cold boot, with each rank's compile cache (warm/cold) as the timeline read it.
Target: the warm relaunch at most 0.5x the cold boot; after the image change, cold again.
Ends by deploying the default cpu engine again. Needs the simulated cluster up (`make demo`). Usage:
    benchmarks/warm_boot.py [--lane 500k] [--other-lane 200k]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
INVENTORY = REPO / "molecule/resources/inventory/hosts.yml"
NODES = ["spark1", "spark2", "spark3", "spark4"]
CACHE_DIR = "/var/tmp/sparkfleet/cache"
IMAGE = "sparkfleet/vllm-cpu-compile:0.32.0"


def compile_engine(variant: int) -> list[str]:
    """The -e arguments that deploy the compile-enabled engine (its image built from the cpu one on the head)."""
    settings = {
        "engine_image": IMAGE,
        "engine_image_build_context": "images/engine-cpu-compile",
        "engine_image_build_args": {"SPARKFLEET_VARIANT": str(variant)},
        "engine_enforce_eager": False,
        # vLLM's own cache on the node too (the cpu profile keeps the image's, which this image does not fill).
        "engine_extra_env": {"VLLM_CACHE_ROOT": "/cache/image/vllm"},
        "smoke_bench_enabled": False,
    }
    return ["-e", json.dumps(settings)]


def run(playbook: str, *extra: str) -> tuple[float, str]:
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    started = time.monotonic()
    command = ["ansible-playbook", "-i", str(INVENTORY), str(REPO / playbook), *extra]
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        sys.exit(f"{playbook} {' '.join(extra)} failed:\n{result.stdout[-4000:]}")
    return time.monotonic() - started, result.stdout


def timeline(output: str) -> tuple[float, list[str]]:
    """The first streamed token's time and each rank's compile cache, from the run's readiness table."""
    first = re.search(r"first streamed token at ([0-9.]+) s", output)
    if not first:
        sys.exit("the run did not relaunch the engine (no readiness timeline in its output)")
    caches = re.findall(r"\(rank \d\)(?:\s+(?:[0-9.]+|-)){6}\s+(warm|cold|-)", output)
    return float(first.group(1)), caches


def image_dirs() -> str:
    """The head's image cache directories and their sizes: what a launch could load (its own image's only)."""
    command = f"cd {CACHE_DIR}/images 2>/dev/null && du -sm * 2>/dev/null || true"
    listing = subprocess.run(["docker", "exec", "spark1", "sh", "-c", command], capture_output=True, text=True, check=False)
    return ", ".join(f"{name} {size} MB" for size, name in (line.split() for line in listing.stdout.splitlines())) or "none"


def empty_caches() -> None:
    for node in NODES:
        subprocess.run(["docker", "exec", node, "sh", "-c", f"rm -rf {CACHE_DIR}/images"], check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lane", default="500k")
    parser.add_argument("--other-lane", default="200k")
    options = parser.parse_args()

    print("building the compile-enabled engine and deploying it (caches emptied first)")
    empty_caches()
    rows = []
    steps = [
        ("cold boot, empty caches", "site.yml", options.lane, 1, ()),
        (f"warm relaunch, lane {options.lane}", "playbooks/lane.yml", options.lane, 1, ("-e", "engine_force_relaunch=true")),
        (f"relaunch into lane {options.other_lane}", "playbooks/lane.yml", options.other_lane, 1, ()),
        ("relaunch after the image changed", "site.yml", options.other_lane, 2, ()),
    ]
    for label, playbook, lane, variant, extra in steps:
        _unused, output = run(playbook, "-e", f"lane={lane}", *extra, *compile_engine(variant))
        rows.append((label, *timeline(output)))
        print(f"  after {label}: the head's image cache directories: {image_dirs()}")

    cold = rows[0][1]
    print(f"{'launch':36} {'first token (s)':>16} {'x cold':>7}  compile cache (ranks 0-3)")
    for label, first, caches in rows:
        print(f"{label:36} {first:16.1f} {first / cold:7.2f}  {' '.join(caches)}")
    warm = rows[1][1] / cold
    print(f"warm relaunch / cold boot: {warm:.2f} (target <= 0.5); after the image change: {' '.join(rows[3][2])} (target: cold)")

    print("deploying the default cpu engine again")
    run("site.yml", "-e", f"lane={options.lane}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
