"""status.yml's live figures (plugins/module_utils/monitoring.py) from Prometheus's answers, in the shape its HTTP
API gives them (/api/v1/query); molecule reads them from the simulated head's Prometheus."""

from __future__ import annotations

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import monitoring


def _vector(*samples):
    return {"resultType": "vector", "result": [{"metric": metric, "value": [1796350000.0, value]} for metric, value in samples]}


def test_the_queries_are_per_engine_over_the_window_and_a_bad_window_is_refused():
    queries = monitoring.queries("5m")
    assert queries["generated_tps"] == "sum by (sparkfleet_engine) (rate(vllm:generation_tokens_total[5m]))"
    assert all("sparkfleet_engine" in expr for expr in queries.values())
    assert queries["up"] == 'min by (sparkfleet_engine) (up{job="sparkfleet-engine"})'
    with pytest.raises(monitoring.FiguresError, match="window '5 minutes' is not a Prometheus duration: give a number and s, m or h"):
        monitoring.queries("5 minutes")


def test_each_engine_gets_its_figures_and_an_engine_without_requests_has_none_for_latency():
    answers = {
        "generated_tps": _vector(({"sparkfleet_engine": "sparks"}, "18.3"), ({"sparkfleet_engine": "second_pair"}, "0")),
        "ttft_p95_s": _vector(({"sparkfleet_engine": "sparks"}, "0.41"), ({"sparkfleet_engine": "second_pair"}, "NaN")),
        "itl_p95_s": _vector(({"sparkfleet_engine": "sparks"}, "0.062")),
        "kv_cache_used": _vector(({"sparkfleet_engine": "sparks"}, "0.031")),
        "requests_in_engine": _vector(({"sparkfleet_engine": "sparks"}, "2"), ({"sparkfleet_engine": "second_pair"}, "0")),
        "up": _vector(({"sparkfleet_engine": "sparks"}, "1"), ({"sparkfleet_engine": "second_pair"}, "0")),
    }
    engines = monitoring.per_engine(answers)
    assert list(engines) == ["second_pair", "sparks"]
    assert engines["sparks"] == {"generated_tps": 18.3, "ttft_p95_s": 0.41, "itl_p95_s": 0.062, "kv_cache_used": 0.031, "requests_in_engine": 2.0, "up": 1.0}
    assert engines["second_pair"]["ttft_p95_s"] is None  # NaN: no request in the window
    alerts = monitoring.firing(_vector(({"alertname": "SparkfleetEngineDown", "sparkfleet_engine": "second_pair", "alertstate": "firing"}, "1")))
    report = monitoring.lines(engines, alerts, "5m", "spark1")
    assert report == [
        "last 5m (Prometheus on spark1):",
        "  engine second_pair: DOWN; 0.0 tokens/s generated, TTFT p95 -, inter-token p95 -, KV cache at most - used, 0 request(s) in the engine now",
        "  engine sparks: up; 18.3 tokens/s generated, TTFT p95 0.41 s, inter-token p95 0.06 s, KV cache at most 3% used, 2 request(s) in the engine now",
        "  alerts firing: SparkfleetEngineDown (second_pair)",
    ]


def test_no_engine_scraped_yet_says_so_and_an_answer_that_is_no_vector_is_refused():
    assert monitoring.lines({}, [], "5m", "spark1") == [
        "last 5m (Prometheus on spark1): no engine's figures yet (none scraped, or scraped for less than 5m)",
        "  alerts firing: none",
    ]
    with pytest.raises(monitoring.FiguresError, match="answer for up is not an instant vector"):
        monitoring.per_engine({"up": {"resultType": "matrix", "result": []}})
