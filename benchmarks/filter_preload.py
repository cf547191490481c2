#!/usr/bin/env python
"""Benchmark (not a test): what loading our filters once in ansible-playbook saves a playbook run.

The callback sparkfleet.vllm.preload_filters (enabled in ansible.cfg) loads every filter file of the collection and
the module_utils behind them in ansible-playbook itself, so that the task workers it forks inherit them
(plugins/plugin_utils/filter_preload.py). This runs a no-op `site.yml` in turns with the callback off (the baseline:
ansible.cfg without its callbacks_enabled line, so every worker that templates one of our filters loads them all, as
ansible-core does) and on, and prints each run's controller CPU seconds (ansible-playbook and every process it waited for),
the machine's (/proc/stat) and its wall time, then the ratios of the medians. Each run must change nothing.

Needs the simulated cluster up with the engine running (`make demo`).
Usage: benchmarks/filter_preload.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import resource
import statistics
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from engine_rerun import INVENTORY, REPO
from node_bytecode_cache import machine_cpu_seconds


def controller_cpu_seconds() -> float:
    """User + system CPU of every child process this one has waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# The baseline's configuration: ansible.cfg less the callback, beside it (its relative paths are the file's).
WITHOUT_PRELOAD = REPO / ".ansible-without-preload.cfg"


def measured_noop_site(config: pathlib.Path, tree: pathlib.Path = REPO) -> tuple[tuple[float, float, float], str]:
    """(controller CPU s, machine CPU s, wall s) and the output of one site.yml of `tree`, run with the configuration
    `config`, that must change nothing."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(config), ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    controller, machine, started = controller_cpu_seconds(), machine_cpu_seconds(), time.monotonic()
    result = subprocess.run(
        ["ansible-playbook", "-i", str(INVENTORY), str(tree / "site.yml"), "-e", "lane=500k"],
        cwd=tree, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    figures = (controller_cpu_seconds() - controller, machine_cpu_seconds() - machine, time.monotonic() - started)
    changed = dict(re.findall(r"^(spark\d)\s+:\s+ok=\d+\s+changed=(\d+)", result.stdout, re.M))
    if result.returncode != 0 or set(changed.values()) != {"0"}:
        sys.exit(f"site.yml ({tree}) failed or was not a no-op (rc {result.returncode}, changed {changed}):\n{result.stdout[-3000:]}")
    return figures, result.stdout


def noop_site(preload: bool) -> tuple[float, float, float]:
    """(controller CPU s, machine CPU s, wall s) of one no-op site.yml, the preload on or off."""
    return measured_noop_site(REPO / "ansible.cfg" if preload else WITHOUT_PRELOAD)[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="pairs of runs, without then with the preload")
    args = parser.parse_args()
    runs: dict[bool, list[tuple[float, float, float]]] = {False: [], True: []}
    lines = (REPO / "ansible.cfg").read_text().splitlines(keepends=True)
    WITHOUT_PRELOAD.write_text("".join(line for line in lines if not line.startswith("callbacks_enabled")))
    try:
        noop_site(True)  # settles the cluster; not counted
        for _round in range(args.rounds):
            for preload in (False, True):
                runs[preload].append(noop_site(preload))
                controller, machine, wall = runs[preload][-1]
                shown = f"{controller:6.1f} controller CPU s, {machine:6.1f} machine CPU s, {wall:6.1f} s wall"
                print(f"no-op site.yml, preload {'on ' if preload else 'off'}: {shown}", flush=True)
    finally:
        WITHOUT_PRELOAD.unlink()
    medians = {preload: [statistics.median(figure) for figure in zip(*figures, strict=True)] for preload, figures in runs.items()}
    for preload in (False, True):
        controller, machine, wall = medians[preload]
        print(f"median, preload {'on ' if preload else 'off'}: {controller:.1f} controller CPU s, {machine:.1f} machine CPU s, {wall:.1f} s wall")
    ratios = [on / off for on, off in zip(medians[True], medians[False], strict=True)]
    print(f"preload on / off: controller CPU {ratios[0]:.2f}x, machine CPU {ratios[1]:.2f}x, wall {ratios[2]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
