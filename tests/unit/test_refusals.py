"""The refusals filter: our checks run in an assert, so a refusal's first line is our sentence."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.vllm.plugins.filter.refusals import CHECKING_FILTERS, refusals

LANES = {"500k": {"max_model_len": 500000, "max_num_seqs": 5}}


def test_checks_that_pass_refuse_nothing():
    assert refusals([{"filter": "checked_lane", "args": [LANES, "500k"]}, {"filter": "checked_gmu", "args": [0.85]}]) == []


def test_every_refusal_is_named_in_order_in_our_words():
    found = refusals(
        [
            {"filter": "checked_lane", "args": [LANES, "300k"]},
            {"filter": "checked_gmu", "args": ["high"]},
            {"filter": "engine_tensor_parallel_size", "args": [8, 4], "kwargs": {"gpus_per_node": 1}},
        ]
    )
    assert len(found) == 3
    assert found[0].startswith("Unknown lane '300k'. Valid lanes: 500k.")
    assert found[1].startswith("engine_gpu_memory_utilization='high' is not a number")
    assert found[2].startswith("engine_tensor_parallel_size=8 x pipeline 1 needs 8 GPUs")


def test_a_check_that_is_not_ours_is_an_error_not_a_pass():
    with pytest.raises(AnsibleFilterError, match=r"'to_json' is not one of our checking filters"):
        refusals([{"filter": "to_json", "args": [1]}])
    assert {"checked_lane", "serve_argv", "engine_env", "checked_graph_guards", "checked_api_key"} <= set(CHECKING_FILTERS)
