"""The previous smoke benchmark at this site as a regression baseline: summary, comparison, refusals, the report section."""

import copy
import json

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import bench_baseline, bench_report

DEFINITIONS = {"small": {"prompt": "Reply with exactly: PING-OK", "max_tokens": 32, "thinking": False},
               "reasoning": {"prompt": "How many widgets?", "max_tokens": 256, "thinking": True}}  # fmt: skip
IDENTITY = {"engine": "sparks", "lane": "500k", "profile": "gb10", "image_id": "sha256:aaa", "argv_sha256": "a1", "time": "2026-12-01T21:00:00+00:00"}
WAVES = [
    {"scenario": "small", "concurrency": 1, "ok": "1/1", "ttft_content_s": 0.30, "e2e_s": 1.30, "decode_tps": 30.0, "prefill_tps": 65.0, "ttft_s": 0.3},
    {"scenario": "small", "concurrency": 2, "ok": "2/2", "ttft_content_s": 0.50, "e2e_s": 2.10, "decode_tps": 16.0, "prefill_tps": None},
    {"scenario": "reasoning", "concurrency": 1, "ok": "1/1", "ttft_content_s": 4.5, "e2e_s": 6.3, "decode_tps": 40.0, "prefill_tps": 100.0},
]  # fmt: skip
TOLERANCE = {"ttft_content_s": 0.25, "e2e_s": 0.25, "decode_tps": 0.2}


def _baseline():
    return json.loads(json.dumps(bench_baseline.summary(WAVES, IDENTITY, DEFINITIONS)))


def test_the_summary_keeps_each_waves_compared_figures_and_what_was_measured():
    kept = _baseline()
    assert kept["version"] == 1
    assert kept["identity"] == IDENTITY
    assert kept["scenarios"] == {name: bench_baseline.scenario_sha(definition) for name, definition in DEFINITIONS.items()}
    assert kept["waves"][0] == {
        "scenario": "small",
        "concurrency": 1,
        "ok": "1/1",
        "ttft_content_s": 0.3,
        "e2e_s": 1.3,
        "decode_tps": 30.0,
        "prefill_tps": 65.0,
    }
    assert bench_baseline.loaded(json.dumps(kept), "x.json") == kept


def test_a_run_within_tolerance_is_compared_and_not_a_regression():
    now = copy.deepcopy(WAVES)
    now[0].update(ttft_content_s=0.37, decode_tps=24.5)  # 1.23x and 0.82x: inside +25% / -20%
    result = bench_baseline.compare(now, DEFINITIONS, {**IDENTITY, "time": "later"}, _baseline(), TOLERANCE)
    assert result["compared"]
    assert result["regressions"] == []
    assert result["differs"] == []  # the time is not a difference
    rows = {(r["scenario"], r["concurrency"], r["figure"]): r for r in result["rows"]}
    assert rows["small", 1, "ttft_content_s"]["ratio"] == pytest.approx(0.37 / 0.30)
    # prefill has no tolerance here: shown, never counted; a figure missing on either side is not compared.
    assert rows["small", 1, "prefill_tps"]["tolerance"] is None
    assert not rows["small", 1, "prefill_tps"]["regressed"]
    assert ("small", 2, "prefill_tps") not in rows


def test_times_up_and_rates_down_beyond_tolerance_are_regressions_naming_both_values():
    now = copy.deepcopy(WAVES)
    now[0].update(ttft_content_s=0.45)  # 1.5x
    now[2].update(decode_tps=30.0)  # 0.75x
    result = bench_baseline.compare(now, DEFINITIONS, {**IDENTITY, "image_id": "sha256:bbb"}, _baseline(), TOLERANCE)
    assert result["regressions"] == [
        "small at concurrency 1: TTFT content 0.450 s is 1.50x the previous run's 0.300 (tolerance +25%)",
        "reasoning at concurrency 1: decode 30.000 tok/s is 0.75x the previous run's 40.000 (tolerance -20%)",
    ]
    assert result["differs"] == ["image_id"]  # a new image is what a baseline is for: said, not refused
    # Faster or more is never a regression.
    better = copy.deepcopy(WAVES)
    better[0].update(ttft_content_s=0.01, decode_tps=300.0)
    assert bench_baseline.compare(better, DEFINITIONS, IDENTITY, _baseline(), TOLERANCE)["regressions"] == []


def test_only_like_is_compared_with_like():
    assert bench_baseline.compare(WAVES, DEFINITIONS, IDENTITY, None, TOLERANCE)["why_not"] == "no earlier run of this engine and lane at this site"
    other = bench_baseline.compare(WAVES, DEFINITIONS, {**IDENTITY, "profile": "cpu"}, _baseline(), TOLERANCE)
    assert not other["compared"]
    assert other["why_not"] == "the earlier run measured profile 'gb10', this one 'cpu'"
    # A scenario asked differently (more tokens) is not compared; the others still are.
    changed = {**DEFINITIONS, "small": {**DEFINITIONS["small"], "max_tokens": 64}}
    result = bench_baseline.compare(WAVES, changed, IDENTITY, _baseline(), TOLERANCE)
    assert {r["scenario"] for r in result["rows"]} == {"reasoning"}
    nothing = bench_baseline.compare(WAVES[:2], changed, IDENTITY, _baseline(), TOLERANCE)
    assert not nothing["compared"]
    assert "no scenario of this one with the same definition and concurrency" in nothing["why_not"]


@pytest.mark.parametrize(
    ("tolerance", "message"),
    [
        ({}, "baseline tolerance {} is not a mapping of figure to fraction"),
        ({"ttft_s": 0.2}, "baseline tolerance names 'ttft_s', which is no compared figure; use one of ttft_content_s, e2e_s, decode_tps, prefill_tps"),
        ({"e2e_s": "fast"}, "baseline tolerance e2e_s: 'fast' is not a number"),
        ({"e2e_s": -0.1}, "baseline tolerance e2e_s: -0.1 must be at least 0, e.g. 0.25"),
        ({"decode_tps": 1.0}, "baseline tolerance decode_tps: 1.0 must be at least 0 and below 1 (a rate cannot fall by 100% or more)"),
    ],
)
def test_a_bad_tolerance_is_refused_naming_it(tolerance, message):
    with pytest.raises(bench_baseline.BaselineError) as refused:
        bench_baseline.checked_tolerance(tolerance)
    assert message in str(refused.value)


@pytest.mark.parametrize(("text", "message"), [("{not json", "is not JSON"), ('{"version": 0, "waves": []}', "is not a benchmark summary of version 1")])
def test_a_file_that_is_no_summary_is_refused_naming_it(text, message):
    with pytest.raises(bench_baseline.BaselineError) as refused:
        bench_baseline.loaded(text, "reports/bench-sparks-500k-x.json")
    assert "baseline reports/bench-sparks-500k-x.json " + message in str(refused.value)
    assert "smoke_bench_baseline_file" in str(refused.value)


def test_the_report_has_its_section_beside_the_published_table():
    now = copy.deepcopy(WAVES)
    now[0].update(ttft_content_s=0.45)
    comparison = bench_baseline.compare(now, DEFINITIONS, {**IDENTITY, "argv_sha256": "b2"}, _baseline(), TOLERANCE)
    text = bench_report.markdown("Smoke", {}, now, [], [], None, None, comparison, "bench-sparks-500k-20261201T210000Z.json")
    lines = text.splitlines()
    at = lines.index("## Against the previous run at this site")
    assert at < lines.index("## Thresholds")
    assert "Baseline: bench-sparks-500k-20261201T210000Z.json." in lines
    assert "What differs from it: argv_sha256 (a regression may come from that change)." in lines
    assert "| small | 1 | TTFT content (s) | 0.300 | 0.450 | 1.50 | +25% | REGRESSED |" in lines
    assert "| reasoning | 1 | decode (tok/s) | 40.000 | 40.000 | 1.00 | -20% | ok |" in lines
    assert "Regressions beyond tolerance: 1." in lines
    first = bench_report.markdown("Smoke", {}, WAVES, [], [], None, None, bench_baseline.compare(WAVES, DEFINITIONS, IDENTITY, None, TOLERANCE))
    assert "Not compared: no earlier run of this engine and lane at this site." in first.splitlines()
