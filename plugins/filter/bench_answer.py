# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Filters of the smoke benchmark's exact-answer check (module_utils/bench_answer).

Documented per filter in the YAML files beside this one (ansible-doc -t filter sparkfleet.vllm.NAME).
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.vllm.plugins.module_utils import bench_answer


def answer_key(launch_record):
    try:
        return bench_answer.answer_key(launch_record)
    except bench_answer.AnswerCheckError as error:
        raise AnsibleFilterError(str(error)) from error


def answer_verdict(answer, expect_contains="", recorded=None, key="", now=""):
    try:
        return bench_answer.verdict(answer, expect_contains or "", recorded, key or "", now or "")
    except bench_answer.AnswerCheckError as error:
        raise AnsibleFilterError(str(error)) from error


class FilterModule:
    """sparkfleet.vllm exact-answer filters."""

    def filters(self):
        return {"answer_key": answer_key, "answer_verdict": answer_verdict}
