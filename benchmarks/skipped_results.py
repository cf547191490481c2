#!/usr/bin/env python
"""Benchmark (not a test): what a role's skipped tasks cost a run, against the same roles at another commit.

ansible-playbook forks a worker for every task on every host, a skipped one too (the worker evaluates its `when`):
~30 ms of the controller's CPU each on this machine. Tasks that only one case runs (the front door's on its node, a
swap file where none is, the NCCL install where it is not in place yet) are reached through one include that is
skipped, not each skipped in turn. This runs a no-op `site.yml` in turns with the roles of a baseline commit (a
`git worktree` of --baseline beside the repository, its own collection link) and with this checkout's, against the
same running cluster, and prints each run's task results (ok and skipped, from the recap), skipped results, its
controller CPU seconds (ansible-playbook and every process it waited for), the machine's (/proc/stat) and its wall
time, then the ratios of the medians. Each run must change nothing.

Needs the simulated cluster up with the engine running (`make demo`).
Usage: benchmarks/skipped_results.py --baseline 271ac09 [--rounds 2]
"""

from __future__ import annotations

import argparse
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from engine_rerun import REPO
from filter_preload import measured_noop_site

RECAP = re.compile(r"^spark\d\s+:\s+ok=(\d+)\s+changed=\d+\s+unreachable=\d+\s+failed=\d+\s+skipped=(\d+)", re.M)


def noop_site(tree: pathlib.Path) -> tuple[int, int, float, float, float]:
    """(task results, skipped results, controller CPU s, machine CPU s, wall s) of one site.yml that must change nothing,
    run with the roles of `tree`."""
    figures, output = measured_noop_site(tree / "ansible.cfg", tree)
    recap = [(int(ok), int(skipped)) for ok, skipped in RECAP.findall(output)]
    return sum(ok + skipped for ok, skipped in recap), sum(skipped for _ok, skipped in recap), *figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="the commit whose roles are the baseline")
    parser.add_argument("--rounds", type=int, default=2, help="pairs of runs, baseline then this checkout")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sparkfleet-baseline-") as scratch:
        baseline = pathlib.Path(scratch) / "tree"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(baseline), args.baseline], check=True)
        try:
            link = baseline / "collections/ansible_collections/sparkfleet/vllm"
            link.parent.mkdir(parents=True)
            link.symlink_to("../../..")
            # The engine image's wheels (git-ignored), hard-linked: the same build context, so the same image.
            wheels = pathlib.Path("images/engine-cpu/wheels")
            subprocess.run(["cp", "-al", str(REPO / wheels), str(baseline / wheels)], check=True)
            trees = {"baseline": baseline, "this checkout": REPO}
            runs: dict[str, list[tuple[int, int, float, float, float]]] = {name: [] for name in trees}
            noop_site(REPO)  # settles the cluster; not counted
            for _round in range(args.rounds):
                for name, tree in trees.items():
                    runs[name].append(noop_site(tree))
                    results, skipped, controller, machine, wall = runs[name][-1]
                    print(
                        f"no-op site.yml, {name:13}: {results} task results ({skipped} skipped), {controller:5.1f} controller CPU s, "
                        f"{machine:5.1f} machine CPU s, {wall:5.1f} s wall",
                        flush=True,
                    )
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(baseline)], check=False)
    medians = {name: [statistics.median(figure) for figure in zip(*figures, strict=True)] for name, figures in runs.items()}
    for name, (results, skipped, controller, machine, wall) in medians.items():
        shown = f"{controller:.1f} controller CPU s, {machine:.1f} machine CPU s, {wall:.1f} s wall"
        print(f"median, {name:13}: {results:.0f} task results ({skipped:.0f} skipped), {shown}")
    ratios = [mine / base for mine, base in zip(medians["this checkout"], medians["baseline"], strict=True)]
    print(f"this checkout / baseline: task results {ratios[0]:.2f}x, controller CPU {ratios[2]:.2f}x, machine CPU {ratios[3]:.2f}x, wall {ratios[4]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
