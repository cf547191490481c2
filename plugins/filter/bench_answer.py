# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Filters of the smoke benchmark's exact-answer check (module_utils/bench_answer).

Documented per filter in the YAML files beside this one (ansible-doc -t filter sparkfleet.vllm.NAME).
"""

from __future__ import annotations

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.deferred import deferred, module_utils
from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filter_errors import as_filters


def answer_verdict(answer, expect_contains="", recorded=None, key="", now=""):
    """The exact answer's verdict (module_utils/bench_answer.verdict)."""
    bench_answer = module_utils("bench_answer")
    return bench_answer.verdict(answer, expect_contains or "", recorded, key or "", now or "")


class FilterModule:
    """sparkfleet.vllm exact-answer filters."""

    def filters(self):
        return as_filters({"answer_key": deferred("bench_answer", "answer_key"), "answer_verdict": answer_verdict})
