# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""The smoke benchmark's exact-answer check: one greedy completion, judged against what it must say.

A profile with real weights names text the answer must contain (a sum the model gets right). The
cpu profile's weights are random but seeded: its answer is gibberish that the same engine must repeat
token for token under greedy sampling, so the first answer of an engine is recorded and every later
launch of that engine is held to it. "That engine" is what decides the answer: the image, the
flags and environment every rank shares, the patched files, the weights and the host NCCL, as the
ranks attested them at launch. The kernel and the driver are left out on purpose: an upgrade of either
must not change an answer, and would be caught if it did.
"""

from __future__ import annotations

import hashlib
import json

KEY_ITEMS = ("image_id", "argv_sha256", "env_sha256", "patches", "weights_manifest", "host_nccl")


class AnswerCheckError(ValueError):
    """A check that cannot be made as asked; the message names the value and the fix."""


def answer_key(launch_record) -> str:
    """sha256 of what decides a greedy answer, from the head rank of a launch record (readiness.json); "" without one."""
    ranks = ((launch_record or {}).get("attestation") or {}).get("ranks") or {}
    if not ranks:
        return ""
    head = next(iter(ranks.values()))
    missing = [item for item in ("image_id", "argv_sha256") if not head.get(item)]
    if missing:
        raise AnswerCheckError(f"the launch record's head rank lacks {', '.join(missing)}: relaunch with this collection's engine role")
    chosen = {item: head.get(item, "") for item in KEY_ITEMS}
    return hashlib.sha256(json.dumps(chosen, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _quoted(text, limit=120):
    text = str(text)
    return repr(text if len(text) <= limit else text[:limit] + "...")


def verdict(answer, expect_contains="", recorded=None, key="", now=""):
    """{state, ok, message, record}: how the answer compares with what it must say.

    states: expected / unexpected (the answer must contain expect_contains), identical / different (held to
    the recorded answer of the same key), recorded (the first answer of this key: record is what to keep),
    unchecked (no expectation and no key to record under).
    """
    if answer is None:
        return {"state": "no_answer", "ok": False, "record": None, "message": "exact answer: the engine gave none (see the request's error above)"}
    answer = str(answer)
    if expect_contains:
        if str(expect_contains) in answer:
            return {"state": "expected", "ok": True, "record": None, "message": f"exact answer: contains the expected {_quoted(expect_contains)}"}
        return {
            "state": "unexpected", "ok": False, "record": None,
            "message": f"exact answer: {_quoted(answer)} does not contain the expected {_quoted(expect_contains)}",
        }  # fmt: skip
    if not key:
        return {"state": "unchecked", "ok": True, "record": None, "message": "exact answer: not checked, the engine has no launch record to key it by"}
    if recorded is not None:
        if not isinstance(recorded, dict) or recorded.get("key") != key or "answer" not in recorded:
            raise AnswerCheckError(f"the recorded answer for key {key[:12]} is not a record of that key: delete it to record a new one")
        if recorded["answer"] == answer:
            return {
                "state": "identical", "ok": True, "record": None,
                "message": f"exact answer: identical to the one recorded at {recorded.get('recorded_at', '?')} for this engine (key {key[:12]})",
            }  # fmt: skip
        return {
            "state": "different", "ok": False, "record": None,
            "message": (
                f"exact answer: differs from the one recorded at {recorded.get('recorded_at', '?')} for this engine (key {key[:12]}): "
                f"recorded {_quoted(recorded['answer'])}, now {_quoted(answer)}"
            ),
        }  # fmt: skip
    return {
        "state": "recorded", "ok": True,
        "record": {"key": key, "answer": answer, "recorded_at": now},
        "message": f"exact answer: recorded for this engine (key {key[:12]}); every later launch of it must answer {_quoted(answer)}",
    }  # fmt: skip
