# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Our filter files and the module_utils behind them, loaded in the process that forks Ansible's task workers.

To find one filter of a collection, ansible-core loads every filter file of that collection (Jinja2Loader walks the
package and calls each file's filters()), and its collection loader compiles a module_utils from source at each import.
Each task and host runs in a worker forked from ansible-playbook, which exits with what it loaded: without this,
every task that uses one of our filters loads all of them again, then the module_utils behind the filter it calls.
Loaded once in ansible-playbook itself (callback sparkfleet.vllm.preload_filters), they are in every worker it forks.
"""

from __future__ import annotations

import importlib
import pathlib
import re
import sys

COLLECTION = "sparkfleet.vllm"
PLUGINS = "ansible_collections.sparkfleet.vllm.plugins."
MODULE_UTILS = f"{PLUGINS}module_utils"
FILTER_DIR = pathlib.Path(__file__).resolve().parents[1] / "filter"
# Any one of our filters: finding it loads every filter file of the collection.
ONE_FILTER = "checked_gmu"
# How a filter file names the module_utils it calls into (plugin_utils/deferred.py).
NAMED_MODULE_UTILS = re.compile(r'\b(?:module_utils|deferred)\("(\w+)"')


def module_utils_behind_filters(filter_dir=FILTER_DIR):
    """The module_utils the filter files call into, read from the files themselves: a new filter's counts at once."""
    return sorted({name for path in pathlib.Path(filter_dir).glob("*.py") for name in NAMED_MODULE_UTILS.findall(path.read_text())})


def preload(filter_loader, filter_dir=FILTER_DIR):
    """Every filter file through FILTER_LOADER (ansible-core's), then the module_utils behind them. -> (the names of
    this collection's plugin modules now loaded, what could not be loaded, one line each): a file that fails here
    fails again, in its own words, where a task uses it."""
    problems = []
    try:
        if filter_loader.get(f"{COLLECTION}.{ONE_FILTER}") is None:
            problems.append(f"no filter {COLLECTION}.{ONE_FILTER}: every filter file was walked, {ONE_FILTER} is not among them")
    except Exception as error:  # reported; raised again where a task uses the filter
        problems.append(f"the filter files: {error}")
    for name in module_utils_behind_filters(filter_dir):
        try:
            importlib.import_module(f"{MODULE_UTILS}.{name}")
        except Exception as error:  # as above
            problems.append(f"module_utils/{name}: {error}")
    loaded = sorted(name.removeprefix(PLUGINS) for name in sys.modules if name.startswith(PLUGINS) and name.count(".") > PLUGINS.count("."))
    return loaded, problems
