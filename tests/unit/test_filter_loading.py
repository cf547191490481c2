"""Our filter files import no module_utils until a filter is called (plugin_utils/deferred.py).

ansible-core finds a collection's filter by importing every filter file of the collection and calling its filters(),
in every worker it forks (once per task and host). These tests load the files as that loop does, in a fresh
interpreter, and check that the filters still work and still refuse in our words once called."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.vllm.plugins.filter import host_stack, readiness, serve_args

FILTERS = pathlib.Path(__file__).resolve().parents[2] / "plugins" / "filter"

# What Ansible's Jinja2Loader does for one name (import each file of the package, call filters() on each), then one
# filter's first call.
LOAD_EVERY_FILTER_FILE = """
import importlib, json, pkgutil, sys
import ansible_collections.sparkfleet.vllm.plugins.filter as package
names = []
for info in pkgutil.iter_modules(package.__path__):
    module = importlib.import_module(f"{package.__name__}.{info.name}")
    names += list(module.FilterModule().filters())
def ours():
    return sorted(m.rsplit(".", 1)[-1] for m in sys.modules if ".vllm.plugins.module_utils." in m)
loaded = ours()
upstream_version = importlib.import_module(f"{package.__name__}.host_stack").FilterModule().filters()["upstream_version"]
answer = upstream_version("1:580.95.05-0ubuntu1")
print(json.dumps({"names": names, "module_utils": loaded, "answer": answer, "after_one_call": ours()}))
"""


def _load_every_filter_file():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}  # the collection as this test session finds it
    result = subprocess.run([sys.executable, "-c", LOAD_EVERY_FILTER_FILE], capture_output=True, text=True, check=True, env=env)
    return json.loads(result.stdout)


def test_loading_every_filter_file_imports_no_module_utils_and_a_call_imports_only_its_own():
    loaded = _load_every_filter_file()
    assert len(loaded["names"]) == len(list(FILTERS.glob("*.yml")))  # every filter was seen
    assert loaded["module_utils"] == []
    assert loaded["answer"] == "580.95.05"
    assert loaded["after_one_call"] == ["nvidia_driver", "nvidia_smi"]  # the called filter's module, and what it imports


def test_a_deferred_filter_keeps_its_function_name():
    assert host_stack.FilterModule().filters()["upstream_version"].__name__ == "upstream_version"


def test_a_deferred_filter_still_refuses_in_our_words():
    filters = serve_args.FilterModule().filters()
    with pytest.raises(AnsibleFilterError, match=r"^engine_gpu_memory_utilization='high' is not a number"):
        filters["checked_gmu"]("high")
    with pytest.raises(AnsibleFilterError, match="readiness_table: not a readiness timeline"):
        readiness.FilterModule().filters()["readiness_table"]({"no": "timeline"})
