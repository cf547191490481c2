"""The smoke benchmark's Markdown report and PNG plot."""

import pathlib

from ansible_collections.sparkfleet.vllm.plugins.module_utils import bench_report

WAVES = [
    {"scenario": "small", "concurrency": 1, "ok": "1/1", "ttft_s": 0.31, "ttft_content_s": 0.31, "e2e_s": 1.3, "decode_tps": 30.0,
     "content_decode_tps": None, "recipe_decode_tps": 31.9, "prefill_tps": 65.0, "prompt_tokens": 20, "tokens_per_chunk": 2.9,
     "gap_p50_ms": 90.0, "gap_p99_ms": 140.0, "errors": [], "spec_decode_mean_accepted_length": 2.87, "spec_decode_acceptance_rate": 0.62,
     "client_prompt_tokens": 60, "client_completion_tokens": 90, "metrics_prompt_tokens": 60, "metrics_completion_tokens": 90, "metrics_agree": True},
    {"scenario": "small", "concurrency": 2, "ok": "1/2", "ttft_s": 0.5, "ttft_content_s": 0.5, "e2e_s": 2.1, "decode_tps": 16.0,
     "content_decode_tps": None, "recipe_decode_tps": 15.6, "prefill_tps": 40.0, "prompt_tokens": 20, "tokens_per_chunk": 2.8,
     "gap_p50_ms": 95.0, "gap_p99_ms": 150.0, "errors": [{"status": 500, "error": "HTTP 500: boom"}]},
    {"scenario": "reasoning", "concurrency": 1, "ok": "1/1", "ttft_s": 0.3, "ttft_content_s": 4.5, "e2e_s": 6.3, "decode_tps": 40.0,
     "content_decode_tps": 35.0, "recipe_decode_tps": 140.0, "prefill_tps": 100.0, "prompt_tokens": 30, "tokens_per_chunk": 2.9,
     "gap_p50_ms": 80.0, "gap_p99_ms": 130.0, "errors": []},
]  # fmt: skip
REFERENCE = {"small": [{"conc": 1, "ttft_s": 0.325, "e2e_s": 1.327, "decode_tps": 31.9, "ok": "1/1"}]}


def test_markdown_has_a_section_per_scenario_with_reference_columns():
    text = bench_report.markdown(
        "Smoke",
        {"lane": "500k"},
        WAVES,
        [{"scenario": "image", "reason": "not multimodal"}],
        ["small at concurrency 2: ok_ratio 1/2 ..."],
        REFERENCE,
        "bench-gb10.yaml",
    )
    lines = text.splitlines()
    assert lines[0] == "# Smoke"
    assert "- lane: 500k" in lines
    assert "## small" in lines
    assert "## reasoning" in lines
    header = next(line for line in lines if line.startswith("| conc"))
    assert "TTFT any (s)" in header
    assert "TTFT content (s)" in header
    assert "ref TTFT (s)" in header
    assert "| 1 | 1/1 | 0.310 | 0.310 | 1.300 | 30.0 | - | 31.9 | 65 | 20 | 2.90 | 90/140 | 0.325 | 1.327 | 31.9 | - |" in lines
    # A concurrency the reference does not have shows dashes, not zeros.
    assert any(line.startswith("| 2 | 1/2 |") and line.endswith("| - | - | - | - |") for line in lines)
    assert "| 1 | 1/1 | 0.300 | 4.500 | 6.300 | 40.0 | 35.0 | 140.0 | 100 | 30 | 2.90 | 80/130 | - | - | - | - |" in lines
    assert "Speculative decoding: mean accepted length 2.87, acceptance 0.62." in lines
    assert "Token counts: client 90 completion / 60 prompt tokens, vLLM's /metrics 90 / 60: they agree." in lines
    # reasoning's waves carry no cross-check (no /metrics): no line for it.
    assert sum(line.startswith("Token counts") for line in lines) == 1
    assert "- x2: HTTP 500: HTTP 500: boom" in lines
    assert "- image: not multimodal" in lines
    assert "- MISSED: small at concurrency 2: ok_ratio 1/2 ..." in lines


def test_markdown_without_reference_has_no_reference_columns():
    text = bench_report.markdown("Smoke", {}, WAVES[:1], [], [], None, None)
    assert "ref TTFT" not in text
    assert "- all met" in text


def test_markdown_names_each_wave_that_ran_twice_under_its_scenario():
    rerun = "second try: on the first, 1 of 1 stream(s) arrived whole in one read, so their decode could not be timed"
    text = bench_report.markdown("Smoke", {}, [dict(WAVES[0], rerun=rerun), WAVES[2]], [], [], None, None)
    small, reasoning = text.split("## reasoning")
    assert f"Waves run twice:\n- x1: {rerun}\n" in small
    assert "Waves run twice" not in reasoning


def test_plot_writes_a_png(tmp_path):
    path = tmp_path / "bench.png"
    bench_report.plot(str(path), "Smoke", WAVES)
    data = pathlib.Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 10_000
