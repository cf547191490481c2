#!/usr/bin/env python
"""Benchmark (not a test): what a re-run and a lane switch cost on the simulated cluster.

Prints the wall time of a no-op `site.yml` re-run with the number of ranks it
restarted, and the overhead of a lane switch (`lane.yml`) over the new
engine's own boot: the readiness timeline's first streamed token, counted
from the first rank's container start (the engine role prints it). Also the
bytes every node sent during the switch (its network counters), beside the
image's and the weights' sizes: a lane switch moves neither.
Targets: no-op <= 45 s with 0 restarts; lane-switch overhead <= 20 s.

Needs the simulated cluster up with the engine running (`make demo`).
Usage: benchmarks/engine_rerun.py [--from-lane 500k] [--to-lane 200k]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
INVENTORY = REPO / "molecule/resources/inventory/hosts.yml"
NODES = ["spark1", "spark2", "spark3", "spark4"]
CONTAINER = "vllm_glm53"


def start_times() -> dict[str, str]:
    times = {}
    for node in NODES:
        result = subprocess.run(
            ["docker", "exec", node, "docker", "inspect", "-f", "{{.State.StartedAt}}", CONTAINER], capture_output=True, text=True, check=False
        )
        times[node] = result.stdout.strip() or "absent"
    return times


def sent_bytes() -> dict[str, int]:
    """Bytes each node has sent on its cluster interface so far (the fan-out and everything else)."""
    counts = {}
    for node in NODES:
        result = subprocess.run(["docker", "exec", node, "cat", "/sys/class/net/eth0/statistics/tx_bytes"], capture_output=True, text=True, check=True)
        counts[node] = int(result.stdout)
    return counts


def artifact_bytes() -> tuple[int, int]:
    """The engine image's size and the weights directory's size on the head."""
    image = subprocess.run(
        ["docker", "exec", "spark1", "docker", "image", "inspect", "-f", "{{.Size}}", "sparkfleet/vllm-cpu:0.32.0"], capture_output=True, text=True, check=True
    )
    weights = subprocess.run(["docker", "exec", "spark1", "du", "-sb", "/var/tmp/sparkfleet/models/tiny-glm"], capture_output=True, text=True, check=True)
    return int(image.stdout), int(weights.stdout.split()[0])


def run(playbook: str, lane: str) -> tuple[float, str]:
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    started = time.monotonic()
    result = subprocess.run(
        ["ansible-playbook", "-i", str(INVENTORY), str(REPO / playbook), "-e", f"lane={lane}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.monotonic() - started
    if result.returncode != 0:
        sys.exit(f"{playbook} -e lane={lane} failed:\n{result.stdout[-3000:]}")
    return elapsed, result.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from-lane", default="500k")
    parser.add_argument("--to-lane", default="200k")
    options = parser.parse_args()

    print(f"bringing the engine to lane {options.from_lane} first (may boot it)")
    run("site.yml", options.from_lane)

    before = start_times()
    noop_s, _unused = run("site.yml", options.from_lane)
    restarted = sum(1 for node, started in start_times().items() if started != before[node])
    print(f"no-op re-run of site.yml:   {noop_s:6.1f} s wall, {restarted} rank(s) restarted   (target <= 45 s, 0 restarts)")

    image_size, weights_size = artifact_bytes()
    sent_before = sent_bytes()
    switch_s, output = run("playbooks/lane.yml", options.to_lane)
    sent = {node: count - sent_before[node] for node, count in sent_bytes().items()}
    boot = re.search(r"first streamed token at ([0-9.]+) s", output)
    if not boot:
        sys.exit("the lane switch did not relaunch the engine (no readiness timeline in its output)")
    boot_s = float(boot.group(1))
    print(
        f"lane switch {options.from_lane} -> {options.to_lane}: {switch_s:6.1f} s wall, new engine's boot to first token {boot_s:.1f} s, "
        f"overhead {switch_s - boot_s:.1f} s   (target <= 20 s)"
    )
    print(
        "bytes sent by each node during the switch: "
        + ", ".join(f"{node} {count / 1e6:.1f} MB" for node, count in sent.items())
        + f"; the image is {image_size / 1e9:.2f} GB: "
        + ("not moved" if max(sent.values()) < image_size / 10 else "IT MAY HAVE MOVED")
        + f" (the cpu profile's weights, {weights_size / 1e6:.2f} MB, are below this measure's noise: lane.yml runs no artifact task)"
    )
    for line in output.splitlines():
        text = line.strip().lstrip("- ").strip("'\"")
        if text.startswith(("readiness of engine", "rank ", "/health answered", "longest step")) or "(rank " in text:
            print("  " + text)
    print(f"ratio no-op / lane switch wall: {noop_s / switch_s:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
