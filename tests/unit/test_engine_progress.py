"""Busy or wedged: engine_progress on /metrics pages recorded from a real vLLM 0.32 CPU server (tests/data/metrics)."""

import pathlib

import pytest

from ansible_collections.sparkfleet.vllm.plugins.filter.engine_progress import FilterModule
from ansible_collections.sparkfleet.vllm.plugins.module_utils.engine_progress import engine_progress, read_counters

PAGES = pathlib.Path(__file__).parents[1] / "data" / "metrics"

engine_progress_filter = FilterModule().filters()["engine_progress"]


def page(name):
    return (PAGES / f"{name}.txt").read_text()


def test_counters_moving_while_requests_run_is_a_busy_engine():
    progress = engine_progress([page("busy_first"), page("busy_last")], 1)
    assert progress == {
        "readable": True,
        "advanced": True,
        "tokens": 308,
        "running": 4,
        "waiting": 0,
        "summary": "308 tokens in 1 s, 4 requests running and 0 waiting",
    }


def test_counters_standing_still_are_not_progress():
    progress = engine_progress([page("idle"), page("idle")], 5)
    assert progress["readable"] is True
    assert progress["advanced"] is False
    assert progress["summary"] == "0 tokens in 5 s, 0 requests running and 0 waiting"


def test_the_counters_are_summed_over_engines_and_read_from_the_real_page():
    counters = read_counters(page("busy_last"))
    assert counters == {
        "vllm:generation_tokens_total": 54385.0,
        "vllm:prompt_tokens_total": 36.0,
        "vllm:num_requests_running": 4.0,
        "vllm:num_requests_waiting": 0.0,
    }
    two_engines = page("busy_last").replace('engine="0"', 'engine="1"')
    # Two data-parallel engines' samples of one metric (the family header once): summed.
    both = page("busy_last") + "\n".join(line for line in two_engines.splitlines() if line.startswith("vllm:generation_tokens_total{"))
    assert read_counters(both)["vllm:generation_tokens_total"] == 2 * 54385.0


@pytest.mark.parametrize(
    "pages",
    [
        [],  # no read (the token came, or the window is 0)
        ["", ""],  # /metrics did not answer
        ["<html>404</html>", "<html>404</html>"],  # not a Prometheus page
        ["# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1.0\n"] * 2,  # no token counters
    ],
)
def test_pages_without_the_counters_are_unreadable_and_never_progress(pages):
    progress = engine_progress(pages, 5)
    assert progress["readable"] is False
    assert progress["advanced"] is False
    assert progress["summary"] == "vLLM's counters not read"


def test_the_filter_takes_what_the_probe_registers_and_names_a_bad_window():
    assert engine_progress_filter([page("busy_first"), None, page("busy_last")], "5")["tokens"] == 308
    with pytest.raises(Exception, match="engine_progress: give a list of /metrics pages and the seconds between them"):
        engine_progress_filter([page("idle")], "soon")
