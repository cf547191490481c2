# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Busy or wedged: vLLM's token counters read twice, a window apart, after a probe's token did not come in time.

A Spark serving its lane at max_num_seqs queues the probe's one-token request behind full sequences, so the
token can miss its deadline while the engine generates thousands of tokens a second; a wedged rank (a hung
collective, a SIGSTOP'd worker) misses it too, with every counter still. Runs on the controller (a filter):
prometheus_client parses the pages (requirements.txt).
"""

from __future__ import annotations

from ansible_collections.sparkfleet.vllm.plugins.module_utils.stream_bench import read_prometheus

# Counters that move whenever the engine does work for any request: decoding and (finished) prefills.
PROGRESS_COUNTERS = ("vllm:generation_tokens_total", "vllm:prompt_tokens_total")
QUEUE_GAUGES = ("vllm:num_requests_running", "vllm:num_requests_waiting")


def read_counters(text: str) -> dict[str, float]:
    """The progress counters and queue gauges of one /metrics page, summed over engines and labels; {} if unreadable."""
    try:
        values = read_prometheus(text or "", (*PROGRESS_COUNTERS, *QUEUE_GAUGES))
    except ValueError:
        return {}
    return values if all(name in values for name in PROGRESS_COUNTERS) else {}


def engine_progress(pages: list[str], window_s: float) -> dict:
    """What two /metrics pages (the first and the last of `pages`), window_s apart, say of the engine.

    advanced: a progress counter moved (the engine works: busy, not wedged). readable: both pages had the
    counters (an engine that serves no /metrics, or an old vLLM, is judged by its token alone).
    """
    first, last = (read_counters(pages[0]), read_counters(pages[-1])) if pages else ({}, {})
    if not first or not last:
        return {"readable": False, "advanced": False, "tokens": 0, "running": None, "waiting": None, "summary": "vLLM's counters not read"}
    tokens = int(sum(last[name] - first[name] for name in PROGRESS_COUNTERS))
    running, waiting = (int(last.get(name, 0)) for name in QUEUE_GAUGES)
    return {
        "readable": True,
        "advanced": tokens > 0,
        "tokens": tokens,
        "running": running,
        "waiting": waiting,
        "summary": f"{tokens} tokens in {window_s:g} s, {running} requests running and {waiting} waiting",
    }
