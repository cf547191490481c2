#!/usr/bin/env python
"""Benchmark (not a test): what the simulated nodes' bytecode cache saves a playbook run.

The node image keeps the bytecode of what Ansible's modules import from their AnsiballZ zip
(molecule/resources/images/node/sim_bytecode_cache.py). This runs a no-op `site.yml` in turns with the cache's
.pth file taken off every node (the baseline: Python compiles every imported file again, as a real Spark does) and
put back, and prints each run's wall time and the machine's CPU seconds (/proc/stat), then the ratios of the
medians. Each run must change nothing (changed=0 on every node).

Needs the simulated cluster up with the engine running (`make demo`); leaves the .pth on every node.
Usage: benchmarks/node_bytecode_cache.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import pathlib
import re
import statistics
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from engine_rerun import NODES, run

PTH = "/usr/lib/python3/dist-packages/sim_bytecode_cache.pth"
PARKED = "/root/sim_bytecode_cache.pth"


def machine_cpu_seconds() -> float:
    """user + nice + system + irq + softirq of every core since boot (/proc/stat counts in 1/100 s)."""
    fields = pathlib.Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    return sum(int(fields[index]) for index in (0, 1, 2, 5, 6)) / 100


def set_cache(on: bool) -> None:
    source, target = (PARKED, PTH) if on else (PTH, PARKED)
    for node in NODES:
        subprocess.run(["docker", "exec", node, "sh", "-c", f"[ ! -e {source} ] || mv {source} {target}"], check=True)


def noop_site() -> tuple[float, float]:
    """(wall s, machine CPU s) of one site.yml that must change nothing (engine_rerun.run stops on a failed run)."""
    cpu = machine_cpu_seconds()
    wall, stdout = run("site.yml", "500k")
    cpu = machine_cpu_seconds() - cpu
    changed = dict(re.findall(r"^(spark\d)\s+:\s+ok=\d+\s+changed=(\d+)", stdout, re.M))
    if set(changed.values()) != {"0"}:
        sys.exit(f"site.yml was not a no-op (changed {changed}):\n{stdout[-3000:]}")
    return wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="pairs of runs, without then with the cache")
    args = parser.parse_args()
    figures: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    try:
        noop_site()  # fills the cache and settles the cluster; not counted
        for _round in range(args.rounds):
            for on in (False, True):
                set_cache(on)
                figures[on].append(noop_site())
                print(f"no-op site.yml, cache {'on ' if on else 'off'}: {figures[on][-1][0]:6.1f} s wall, {figures[on][-1][1]:6.1f} CPU s", flush=True)
    finally:
        set_cache(True)
    walls = {on: statistics.median(wall for wall, _cpu in runs) for on, runs in figures.items()}
    cpus = {on: statistics.median(cpu for _wall, cpu in runs) for on, runs in figures.items()}
    print(f"median, cache off: {walls[False]:.1f} s wall, {cpus[False]:.1f} CPU s; cache on: {walls[True]:.1f} s, {cpus[True]:.1f} CPU s")
    print(f"cache on / off: wall {walls[True] / walls[False]:.2f}x, CPU {cpus[True] / cpus[False]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
