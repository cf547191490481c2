# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""The last minutes of every engine as the cluster's Prometheus holds them: the queries, and their answers as lines.

status.yml's live figures (module prometheus_figures, docs/monitoring.md). Pure: the module asks Prometheus's HTTP API
(/api/v1/query) and hands each answer's `data` here.
"""

from __future__ import annotations

import math
import re

# What a user asks first of an engine, per engine (sparkfleet_engine, the label the monitoring role's scrape gives).
FIGURES = {
    "generated_tps": "sum by (sparkfleet_engine) (rate(vllm:generation_tokens_total[{window}]))",
    "ttft_p95_s": "histogram_quantile(0.95, sum by (sparkfleet_engine, le) (rate(vllm:time_to_first_token_seconds_bucket[{window}])))",
    "itl_p95_s": "histogram_quantile(0.95, sum by (sparkfleet_engine, le) (rate(vllm:inter_token_latency_seconds_bucket[{window}])))",
    "kv_cache_used": "max by (sparkfleet_engine) (max_over_time(vllm:kv_cache_usage_perc[{window}]))",
    "requests_in_engine": "sum by (sparkfleet_engine) (vllm:num_requests_running + vllm:num_requests_waiting)",
    "up": 'min by (sparkfleet_engine) (up{{job="sparkfleet-engine"}})',
}
FIRING = 'ALERTS{alertstate="firing"}'
WINDOW = re.compile(r"^[1-9][0-9]*[smh]$")


class FiguresError(ValueError):
    """A window or an answer we cannot read, named with the fix."""


def queries(window):
    """{figure: PromQL} over the last `window` (a Prometheus duration such as 5m)."""
    if not WINDOW.match(str(window)):
        raise FiguresError(f"window {window!r} is not a Prometheus duration: give a number and s, m or h (5m).")
    return {name: expr.format(window=window) for name, expr in FIGURES.items()}


def _number(text):
    value = float(text)
    return value if math.isfinite(value) else None  # no request in the window: Prometheus says NaN


def per_engine(answers):
    """{figure: the `data` of its answer} -> {engine: {figure: number or None}}."""
    engines = {}
    for figure, data in answers.items():
        if not isinstance(data, dict) or data.get("resultType") != "vector":
            raise FiguresError(f"Prometheus's answer for {figure} is not an instant vector: {data!r}.")
        for sample in data.get("result") or []:
            engine = sample.get("metric", {}).get("sparkfleet_engine", "?")
            engines.setdefault(engine, dict.fromkeys(FIGURES))[figure] = _number(sample["value"][1])
    return dict(sorted(engines.items()))


def firing(data):
    """The `data` of the ALERTS query -> ["alertname (engine or instance)", ...], sorted."""
    found = set()
    for sample in (data or {}).get("result") or []:
        labels = sample.get("metric", {})
        where = labels.get("sparkfleet_engine") or labels.get("instance") or ""
        found.add(f"{labels.get('alertname', '?')} ({where})" if where else labels.get("alertname", "?"))
    return sorted(found)


def _seconds(value):
    return "-" if value is None else f"{value:.2f} s"


def lines(engines, alerts, window, where):
    """The report: one line per engine, then the alerts firing."""
    if not engines:
        report = [f"last {window} (Prometheus on {where}): no engine's figures yet (none scraped, or scraped for less than {window})"]
    else:
        report = [f"last {window} (Prometheus on {where}):"]
    for engine, figures in engines.items():
        state = "up" if figures.get("up") == 1 else "DOWN" if figures.get("up") == 0 else "not scraped"
        tps, kv, held = figures.get("generated_tps"), figures.get("kv_cache_used"), figures.get("requests_in_engine")
        report.append(
            f"  engine {engine}: {state}; {'-' if tps is None else f'{tps:.1f}'} tokens/s generated, "
            f"TTFT p95 {_seconds(figures.get('ttft_p95_s'))}, inter-token p95 {_seconds(figures.get('itl_p95_s'))}, "
            f"KV cache at most {'-' if kv is None else f'{kv:.0%}'} used, {'-' if held is None else int(held)} request(s) in the engine now"
        )
    report.append(f"  alerts firing: {', '.join(alerts) if alerts else 'none'}")
    return report
