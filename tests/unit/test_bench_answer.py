"""The smoke benchmark's exact-answer check (module_utils/bench_answer): the key and the verdicts."""

from __future__ import annotations

import json
import pathlib

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import attestation, bench_answer

REPO = pathlib.Path(__file__).resolve().parents[2]


def _record(**head_changes):
    """A launch record as the engine role writes it: rank attestations from module_utils/attestation."""
    base = {
        "image_id": "sha256:" + "d" * 64,
        "argv": ["vllm", "serve", "/model", "--tensor-parallel-size", "2", "--max-model-len", "262144", "--node-rank", "0"],
        "env": {"OMP_NUM_THREADS": "1", "VLLM_HOST_IP": "192.168.100.11"},
        "patches": ["ab" * 32],
        "weights_manifest": "cd" * 32,
        "kernel": "6.1.0-28-amd64",
        "driver": "",
    }
    head = attestation.rank_attestation({**base, **head_changes})
    worker = attestation.rank_attestation({**base, "env": {**base["env"], "VLLM_HOST_IP": "192.168.100.12"}})
    return {"attestation": {"engine": "sparks", "ranks": {"spark1": head, "spark2": worker}}}


def test_the_key_follows_what_decides_the_answer_and_not_the_kernel_or_driver():
    key = bench_answer.answer_key(_record())
    assert len(key) == 64
    assert bench_answer.answer_key(_record(kernel="6.12.0", driver="580.95.05")) == key
    assert bench_answer.answer_key(_record(env={"OMP_NUM_THREADS": "1", "VLLM_HOST_IP": "10.0.0.1"})) == key  # the node's own address
    for changed in (
        {"image_id": "sha256:" + "e" * 64},
        {"argv": ["vllm", "serve", "/model", "--tensor-parallel-size", "2", "--max-model-len", "131072", "--node-rank", "0"]},
        {"env": {"OMP_NUM_THREADS": "2"}},
        {"patches": []},
        {"weights_manifest": "ef" * 32},
        {"host_nccl": "12" * 32},
    ):
        assert bench_answer.answer_key(_record(**changed)) != key, changed


def test_no_record_gives_no_key_and_a_record_without_an_image_is_refused():
    assert bench_answer.answer_key(None) == ""
    assert bench_answer.answer_key({"attestation": {"ranks": {}}}) == ""
    with pytest.raises(bench_answer.AnswerCheckError, match="lacks image_id, argv_sha256: relaunch"):
        bench_answer.answer_key({"attestation": {"ranks": {"spark1": {"kernel": "6.1"}}}})


def test_an_expected_text_is_looked_for_in_the_answer():
    assert bench_answer.verdict("17 x 23 = 391", expect_contains="391")["state"] == "expected"
    wrong = bench_answer.verdict("It is 381.", expect_contains="391")
    assert (wrong["state"], wrong["ok"]) == ("unexpected", False)
    assert wrong["message"] == "exact answer: 'It is 381.' does not contain the expected '391'"


def test_the_first_answer_is_recorded_then_held_to():
    key = bench_answer.answer_key(_record())
    first = bench_answer.verdict("pong pong fizz", key=key, now="2026-12-01T23:00:00+00:00")
    assert (first["state"], first["ok"]) == ("recorded", True)
    assert first["record"] == {"key": key, "answer": "pong pong fizz", "recorded_at": "2026-12-01T23:00:00+00:00"}
    kept = json.loads(json.dumps(first["record"]))  # as the role writes and reads it back
    same = bench_answer.verdict("pong pong fizz", recorded=kept, key=key)
    assert (same["state"], same["ok"], same["record"]) == ("identical", True, None)
    assert same["message"] == f"exact answer: identical to the one recorded at 2026-12-01T23:00:00+00:00 for this engine (key {key[:12]})"
    other = bench_answer.verdict("pong fizz fizz", recorded=kept, key=key)
    assert (other["state"], other["ok"]) == ("different", False)
    assert "recorded 'pong pong fizz', now 'pong fizz fizz'" in other["message"]


def test_no_key_no_answer_and_a_foreign_record():
    assert bench_answer.verdict("anything")["state"] == "unchecked"
    failed = bench_answer.verdict(None, key="k" * 64)
    assert (failed["state"], failed["ok"]) == ("no_answer", False)
    with pytest.raises(bench_answer.AnswerCheckError, match="is not a record of that key: delete it"):
        bench_answer.verdict("x", recorded={"key": "other", "answer": "x"}, key="k" * 64)
    long = bench_answer.verdict("y" * 500, expect_contains="391")["message"]
    assert "y" * 120 + "..." in long
    assert "y" * 121 not in long
