#!/usr/bin/env python
"""Benchmark (not a test): what a forked Ansible worker pays to find one of our filters.

ansible-core finds a collection's filter by importing every filter file of the collection and calling filters() on
each (Jinja2Loader.get_with_context), in each worker it forks: once per task and host that uses one of our filters.
This forks a worker from a parent that has imported what ansible-playbook imports, runs that loop in it, and prints
the median over the rounds, for the filter files as they are (their module_utils imported at a filter's first call,
plugins/plugin_utils/deferred.py) and, as the baseline in the same run, for the same loop with every module_utils
behind the filters imported first (what the files did when they imported them at their top).

Needs nothing running. Usage: benchmarks/filter_loading.py [--rounds 40]
"""

from __future__ import annotations

import argparse
import importlib
import os
import pathlib
import pkgutil
import statistics
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "collections"))  # the link `make` makes: the repository as sparkfleet.vllm

import ansible_collections.sparkfleet.vllm.plugins.filter as filter_package  # noqa: E402
from ansible_collections.sparkfleet.vllm.plugins.plugin_utils import filter_preload  # noqa: E402

# What ansible-playbook holds before it forks a worker.
PARENT_IMPORTS = ("ansible.plugins.loader", "ansible.template")
# The module_utils the filter files call into, read from the files themselves (a new filter's count in the baseline).
MODULE_UTILS_BEHIND_FILTERS = filter_preload.module_utils_behind_filters()


def find_one_filter(eager: bool) -> None:
    """The worker's loop; eager: the module_utils first, as the files imported them at their top."""
    if eager:
        for name in MODULE_UTILS_BEHIND_FILTERS:
            importlib.import_module(f"ansible_collections.sparkfleet.vllm.plugins.module_utils.{name}")
    for info in pkgutil.iter_modules(filter_package.__path__):
        importlib.import_module(f"{filter_package.__name__}.{info.name}").FilterModule().filters()


def in_a_forked_worker(eager: bool) -> float:
    """Seconds the loop took in a freshly forked child (nothing of ours imported in the parent)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        started = time.perf_counter()
        find_one_filter(eager)
        os.write(write, repr(time.perf_counter() - started).encode())
        os._exit(0)
    os.close(write)
    seconds = float(os.read(read, 64))
    os.close(read)
    os.waitpid(pid, 0)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    rounds = parser.parse_args().rounds
    for name in PARENT_IMPORTS:
        importlib.import_module(name)
    assert not any(".vllm.plugins.filter." in name for name in sys.modules), "the parent must not hold our filter files"
    results = {eager: [] for eager in (True, False)}
    for _round in range(rounds):  # alternated, so that the machine's drift falls on both
        for eager in (True, False):
            results[eager].append(in_a_forked_worker(eager))
    baseline, current = statistics.median(results[True]), statistics.median(results[False])
    print(f"finding one filter in a forked worker, median of {rounds}:")
    print(f"  module_utils imported by the filter files (baseline): {baseline * 1000:6.1f} ms")
    print(f"  module_utils imported at a filter's first call:       {current * 1000:6.1f} ms  ({current / baseline:.2f}x the baseline)")


if __name__ == "__main__":
    main()
