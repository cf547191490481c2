"""stream_bench arithmetic on streams recorded from a real vLLM 0.32 CPU server (tests/data/streams)."""

import itertools
import json
import pathlib

import pytest
import yaml

from ansible_collections.sparkfleet.vllm.plugins.module_utils import stream_bench as sb

REPO = pathlib.Path(__file__).resolve().parents[2]

STREAMS = pathlib.Path(__file__).parents[1] / "data" / "streams"


def replay(name, one_read=False):
    """Feed a recording line by line with its recorded arrival times (or, one_read, every line at the moment of the
    last: the whole answer in one network read); returns (record, header)."""
    rows = [json.loads(line) for line in (STREAMS / f"{name}.jsonl").read_text().splitlines()]
    header, lines = rows[0], rows[1:]
    rec = sb.StreamRecord(t_start=0.0)
    if header["status"] != 200:
        rec.fail(f"HTTP {header['status']}: {''.join(r['line'] for r in lines)}", status=header["status"], t=lines[-1]["t"])
        return rec, header
    decoder = sb.SSEDecoder()
    for row in lines:
        data = decoder.feed_line(row["line"])
        if data is not None:
            rec.feed_data(data, lines[-1]["t"] if one_read else row["t"])
    rec.finish(lines[-1]["t"])
    return rec, header


def chunks(name):
    """(time, chunk) with the time of the blank line that ends the event, when it is dispatched."""
    rows = [json.loads(line) for line in (STREAMS / f"{name}.jsonl").read_text().splitlines()][1:]
    return [(rows[i + 1]["t"], json.loads(row["line"][6:])) for i, row in enumerate(rows) if row["line"].startswith("data: {")]


def test_thinking_off_all_content():
    rec, _unused = replay("thinking_off")
    got = rec.result()
    data = chunks("thinking_off")
    token_times = [t for t, c in data if c["choices"] and "role" not in c["choices"][0]["delta"] and c["choices"][0]["delta"]]
    usage = data[-1][1]["usage"]
    assert got["ok"]
    assert got["error"] is None
    assert got["completion_tokens"] == usage["completion_tokens"] == 48
    # vLLM 0.32 reports reasoning_tokens 43 here although every chunk is content: the stream wins.
    assert usage["completion_tokens_details"]["reasoning_tokens"] > 0
    assert got["reasoning_tokens"] == 0
    assert got["reasoning_tokens_source"] == "stream"
    assert got["ttft_s"] == pytest.approx(token_times[0])
    assert got["ttft_content_s"] == got["ttft_s"]
    # 47 tokens after the first, over the time from the first to the last token chunk.
    assert got["decode_tps"] == pytest.approx(47 / (token_times[-1] - token_times[0]))
    assert got["tpot_ms"] == pytest.approx(1000 * (token_times[-1] - token_times[0]) / 47)
    assert got["content_decode_tps"] is None  # only reported when reasoning is present
    assert got["prefill_tps"] == pytest.approx(usage["prompt_tokens"] / token_times[0])
    assert got["chunks"] == len(token_times)
    assert got["tokens_per_chunk"] == pytest.approx(48 / len(token_times))
    gaps = [b - a for a, b in itertools.pairwise(token_times)]
    assert got["gap_p50_ms"] == pytest.approx(1000 * sb.percentile(gaps, 50))


def test_a_stream_that_arrives_in_one_read_has_no_decode_rate_and_says_so():
    got = replay("thinking_off", one_read=True)[0].result()
    assert got["ok"]
    assert got["arrived_at_once"] is True
    assert got["decode_tps"] is None
    assert got["tpot_ms"] is None
    assert replay("thinking_off")[0].result()["arrived_at_once"] is False
    wave = sb.summarise_wave("small", 1, [got])
    assert wave["arrived_at_once"] == 1
    assert sb.check_thresholds(wave, {"decode_tps_min": 0.5}) == [
        "small at concurrency 1: decode_tps was not measured (threshold min 0.5): 1 of 1 stream(s) arrived whole in one read "
        "(a proxy that buffers the stream, or a client not scheduled while it streamed)"
    ]
    # The client's second try (stream_client) marks the wave, and the miss says it came whole twice.
    (missed,) = sb.check_thresholds(dict(wave, rerun="second try: ..."), {"decode_tps_min": 0.5})
    assert "arrived whole in one read, on both tries (a proxy" in missed


def test_thinking_on_separates_first_token_from_first_content():
    rec, header = replay("thinking_on")
    got = rec.result()
    assert header["request"]["chat_template_kwargs"] == {"enable_thinking": True}
    assert got["ok"]
    assert got["ttft_s"] is not None
    # The random-weights model thinks for the whole budget: no content, so no content TTFT,
    # and every completion token is reasoning, whatever the usage count says.
    assert rec.reasoning_chunks > 0
    assert rec.content_chunks == 0
    assert got["ttft_content_s"] is None
    assert got["recipe_decode_tps"] is None
    assert got["reasoning_tokens"] == got["completion_tokens"] == 48


def test_reasoning_then_content_rates_do_not_mix():
    """A hand-built stream with both phases (times chosen so the arithmetic is visible)."""
    rec = sb.StreamRecord(t_start=0.0)
    rec.feed({"choices": [{"delta": {"role": "assistant", "content": ""}}]}, 0.5)
    for i in range(10):  # 10 reasoning tokens at 1.0, 1.1, ... 1.9 s
        rec.feed({"choices": [{"delta": {"reasoning": "r"}}]}, 1.0 + i / 10)
    for i in range(5):  # 5 content tokens at 3.0, 3.5, ... 5.0 s
        rec.feed({"choices": [{"delta": {"content": "c"}}]}, 3.0 + i / 2)
    rec.feed({"choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 15, "completion_tokens_details": {"reasoning_tokens": 10}}}, 5.1)
    rec.feed_data("[DONE]", 5.2)
    got = rec.result()
    assert got["ttft_s"] == pytest.approx(1.0)  # first token of any kind
    assert got["ttft_content_s"] == pytest.approx(3.0)  # the recipe's TTFT
    assert got["decode_tps"] == pytest.approx(14 / 4.0)  # 14 tokens after the first, 1.0 s -> 5.0 s
    assert got["content_decode_tps"] == pytest.approx(4 / 2.0)  # 4 content tokens after the first, 3.0 -> 5.0 s
    assert got["recipe_decode_tps"] == pytest.approx(15 / (5.2 - 3.0))  # inflated: reasoning counted
    assert got["prefill_tps"] == pytest.approx(100 / 1.0)
    assert got["content_tokens"] == 5
    assert got["reasoning_tokens_source"] == "usage"


def test_reasoning_content_spelling_is_read():
    new, _unused = replay("thinking_on")
    old, header = replay("reasoning_content")
    assert "derived" in header
    assert old.reasoning_chunks == new.reasoning_chunks > 0
    assert old.result()["ttft_s"] == new.result()["ttft_s"]


def test_usage_chunk_with_empty_choices_is_read():
    rec, _unused = replay("thinking_off")
    usage_chunk = [c for _unused, c in chunks("thinking_off") if c.get("usage")]
    assert usage_chunk
    assert usage_chunk[0]["choices"] == []
    assert rec.usage == usage_chunk[0]["usage"]


def test_closed_early_is_an_error_not_a_zero():
    got, _unused = replay("closed_early")
    figures = got.result()
    assert not figures["ok"]
    assert "closed the stream before [DONE]" in figures["error"]


def test_error_mid_stream_keeps_the_message_and_code():
    got, _unused = replay("error_midstream")
    figures = got.result()
    assert not figures["ok"]
    assert figures["status"] == 400
    assert "error in the stream" in figures["error"]
    assert "tool-call-parser" in figures["error"]


def test_http_error_row_has_status_and_excerpt():
    got, header = replay("http_400")
    figures = got.result()
    assert header["status"] == 400
    assert figures["status"] == 400
    assert not figures["ok"]
    assert "BadRequestError" in figures["error"]


def test_sse_decoder_rules():
    decoder = sb.SSEDecoder()
    assert decoder.feed_line(": ping") is None
    assert decoder.feed_line("event: x") is None
    assert decoder.feed_line("data: a") is None
    assert decoder.feed_line("data:b") is None
    assert decoder.feed_line("") == "a\nb"
    assert decoder.feed_line("") is None
    assert decoder.feed_line("data: tail") is None
    assert decoder.flush() == "tail"


def test_sse_decoder_bytes_split_anywhere_give_the_same_events():
    raw = (STREAMS / "thinking_on.jsonl").read_text().splitlines()[1:]
    stream = "".join(json.loads(row)["line"] + "\n" for row in raw).encode()
    whole = sb.SSEDecoder().feed_bytes(stream)
    pieces, decoder = [], sb.SSEDecoder()
    for start in range(0, len(stream), 7):  # 7-byte reads split lines and UTF-8 sequences
        pieces += decoder.feed_bytes(stream[start : start + 7])
    assert pieces == whole
    assert whole[-1] == "[DONE]"
    assert len(whole) == sum(1 for row in raw if json.loads(row)["line"].startswith("data:"))


def test_sse_decoder_one_event_per_read_as_vllm_writes_them_gives_the_same_events():
    """The fast path (a whole `data: ...` event and its blank line in one read) and the line path agree,
    also where a split read leaves a partial line before whole events come again."""
    raw = (STREAMS / "thinking_on.jsonl").read_text().splitlines()[1:]
    stream = "".join(json.loads(row)["line"] + "\n" for row in raw).encode()
    whole = sb.SSEDecoder().feed_bytes(stream)
    events = [event + b"\n\n" for event in stream.split(b"\n\n") if event]
    decoder = sb.SSEDecoder()
    assert [data for event in events for data in decoder.feed_bytes(event)] == whole
    decoder, got = sb.SSEDecoder(), []
    got += decoder.feed_bytes(events[0][:9])  # a partial line is pending: the next read goes line by line
    got += decoder.feed_bytes(events[0][9:])
    for event in events[1:]:
        got += decoder.feed_bytes(event)
    assert got == whole
    # A read with a comment line and an event is not the fast path's shape: still every rule holds.
    assert sb.SSEDecoder().feed_bytes(b": ping\ndata: {}\n\n") == ["{}"]


def test_whole_event_hands_over_the_json_of_one_vllm_event_and_nothing_else():
    decoder = sb.SSEDecoder()
    assert decoder.whole_event(b'data: {"a":1}\n\n') == b'{"a":1}'
    assert decoder.whole_event(b"data: [DONE]\n\n") is None  # the sentinel goes through feed_data
    assert decoder.whole_event(b': ping\ndata: {"a":1}\n\n') is None
    assert decoder.whole_event(b'data: {"a":1}\n\ndata: {"b":2}\n\n') is None  # two events: line by line
    assert decoder.whole_event(b'data: {"a":1}\n') is None
    decoder.feed_bytes(b'data: {"a"')  # a partial line is pending
    assert decoder.whole_event(b":1}\n\n") is None


def test_whole_events_fed_as_json_bytes_give_the_figures_of_the_line_path():
    """What the client does per read (the JSON bytes straight to feed_json) and the line path agree on every figure."""
    for name in ("thinking_on", "thinking_off", "reasoning_content"):
        rows = [json.loads(line) for line in (STREAMS / f"{name}.jsonl").read_text().splitlines()][1:]
        by_lines, header = replay(name)
        rec, decoder = sb.StreamRecord(t_start=0.0), sb.SSEDecoder()
        # Each event as one read, at the time of its blank line (when the line path dispatches it).
        events = [(row["line"], rows[index + 1]["t"]) for index, row in enumerate(rows[:-1]) if row["line"].startswith("data:")]
        for line, t in events:
            chunk = (line + "\n\n").encode()
            data = decoder.whole_event(chunk)
            if data is not None:
                rec.feed_json(data, t)
            else:
                for event in decoder.feed_bytes(chunk):
                    rec.feed_data(event, t)
        rec.finish(rows[-1]["t"])
        assert header["status"] == 200
        assert rec.result() == by_lines.result(), name
        assert rec.done
        assert rec.error is None
        assert rec.result()["completion_tokens"] > 0


def test_json_bytes_that_are_not_json_are_an_error_naming_them():
    rec = sb.StreamRecord(0.0)
    rec.feed_json(b"{not json", 0.2)
    assert rec.error == "not JSON in the stream: {not json"


def test_not_json_is_an_error():
    rec = sb.StreamRecord(0.0)
    rec.feed_data("<html>proxy error</html>", 0.2)
    assert "not JSON" in rec.error


def test_wave_summary_medians_and_ok_count():
    results = [
        {"ok": True, "ttft_s": 1.0, "decode_tps": 10.0, "gaps_ms": [10.0, 20.0]},
        {"ok": True, "ttft_s": 3.0, "decode_tps": 30.0, "gaps_ms": [30.0]},
        {"ok": False, "status": 500, "error": "HTTP 500: boom", "ttft_s": None, "gaps_ms": []},
    ]
    wave = sb.summarise_wave("small", 3, results, [0.000, 0.010, 0.030])
    assert wave["ok"] == "2/3"
    assert wave["ok_ratio"] == pytest.approx(2 / 3)
    assert wave["ttft_s"] == 2.0
    assert wave["decode_tps"] == 20.0
    assert wave["gap_p50_ms"] == pytest.approx(20.0)
    assert wave["start_spread_ms"] == pytest.approx(30.0)
    assert wave["errors"] == [{"status": 500, "error": "HTTP 500: boom"}]


def test_thresholds_name_figure_limit_and_value():
    wave = {"scenario": "small", "concurrency": 2, "ok": "1/2", "ok_count": 1, "ok_ratio": 0.5, "ttft_s": 0.8, "decode_tps": 12.0}
    missed = sb.check_thresholds(wave, {"ok_ratio_min": 1.0, "ttft_s_max": 0.5, "decode_tps_min": 10})
    assert missed == [
        "small at concurrency 2: ok_ratio 1/2 is below the threshold 1.0 (ok_ratio_min)",
        "small at concurrency 2: ttft_s 0.800 is above the threshold 0.5 (ttft_s_max)",
    ]
    with pytest.raises(sb.StreamBenchError, match="ttft_max"):
        sb.check_thresholds(wave, {"ttft_max": 1})


def test_thresholds_from_published_reference_with_tolerance():
    reference = {"small": [{"conc": 1, "ttft_s": 0.312, "e2e_s": 1.452, "decode_tps": 28.1, "ok": "1/1"}]}
    limits = sb.thresholds_for("small", 1, {"small": {"ok_ratio_min": 1.0, "by_concurrency": {1: {"e2e_s_max": 2}}}}, reference, 0.25)
    assert limits == {"ttft_content_s_max": 0.39, "e2e_s_max": 2, "recipe_decode_tps_min": 21.075, "ok_ratio_min": 1.0}
    assert sb.thresholds_for("small", 7, {}, reference, 0.25) == {}


def test_failed_requests_are_tolerated_where_the_published_table_had_them():
    """GB10 500k reasoning at concurrency 3 published 2/3: one failure of three meets it, two do not."""
    published = yaml.safe_load((REPO / "roles/smoke_bench/files/bench-gb10.yaml").read_text())["lanes"]["500k"]
    limits = sb.thresholds_for("reasoning", 3, {}, published, 0.5)
    assert limits["ok_ratio_min"] == 0.666
    wave = {"scenario": "reasoning", "concurrency": 3, "ok": "2/3", "ok_count": 2, "ok_ratio": 2 / 3, "ttft_content_s": 10.0, "e2e_s": 12.0}
    assert sb.check_thresholds(wave, limits) == []
    one = dict(wave, ok="1/3", ok_count=1, ok_ratio=1 / 3)
    assert sb.check_thresholds(one, limits)[0].startswith("reasoning at concurrency 3: ok_ratio 1/3 is below")
    assert sb.thresholds_for("reasoning", 2, {}, published, 0.5)["ok_ratio_min"] == 1.0  # 2/2 published
    assert sb.thresholds_for("large", 1, {}, published, 0.5)["ok_ratio_min"] == 1.0  # no count published: none may fail
    with pytest.raises(sb.StreamBenchError, match="reference cell ok 'most' is not GOOD/TOTAL"):
        sb.published_ok_ratio("most")


def test_the_gb10_profiles_leave_ok_ratio_to_the_published_table():
    profiles = yaml.safe_load((REPO / "playbooks/group_vars/all/profiles.yml").read_text())["profiles"]
    for scenario, limits in (profiles["gb10"]["bench"]["thresholds"] or {}).items():
        assert "ok_ratio_min" not in limits, scenario
    assert profiles["gb10"]["bench"]["reference_mtp_k"] == 3


@pytest.mark.parametrize("value", [0, -1, "two", 1.5, [1, 0]])
def test_bad_concurrency_is_refused_with_the_value(value):
    with pytest.raises(sb.StreamBenchError, match=repr(value if not isinstance(value, list) else 0)):
        sb.concurrency_levels(value)


def test_concurrency_forms():
    assert sb.concurrency_levels(3) == [1, 2, 3]
    assert sb.concurrency_levels([4, 1, 4]) == [1, 4]


def test_unknown_scenario_lists_the_known_ones():
    with pytest.raises(sb.StreamBenchError, match="'huge' does not exist; known scenarios: large, small"):
        sb.select_scenarios(["small", "huge"], {"small": {}, "large": {}})


def test_salted_pad_differs_from_the_first_token():
    a, b = sb.salted_pad("run-a", 50), sb.salted_pad("run-b", 50)
    assert a[:6] != b[:6]
    assert len(a.split()) > 50


def test_request_body_switches_thinking_and_asks_for_usage():
    body = sb.request_body("m", {"prompt": "hi", "max_tokens": 8, "thinking": True})
    assert body["stream"]
    assert body["stream_options"] == {"include_usage": True}
    assert body["chat_template_kwargs"] == {"enable_thinking": True}
    assert body["max_tokens"] == 8
    image = sb.request_body("m", {"prompt": "what is this"}, image_url="data:image/png;base64,xx")
    assert image["messages"][0]["content"][1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64,xx"}}


METRICS_BEFORE = """# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 100.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 300.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 150.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.0
"""
METRICS_AFTER = (
    METRICS_BEFORE.replace("100.0", "200.0")
    .replace("300.0", "600.0")
    .replace("} 150.0", "} 337.0")
    .replace('perc{engine="0",model_name="m"} 0.0', 'perc{engine="0",model_name="m"} 0.25')
)


def test_prometheus_spec_decode_figures():
    before, after = sb.read_prometheus(METRICS_BEFORE), sb.read_prometheus(METRICS_AFTER)
    figures = sb.spec_decode_figures(before, after)
    # 100 drafts of 3 tokens, 187 accepted: 1 + 1.87 tokens per step, 187/300 accepted.
    assert figures["spec_decode_mean_accepted_length"] == pytest.approx(2.87)
    assert figures["spec_decode_acceptance_rate"] == pytest.approx(187 / 300)
    assert figures["kv_cache_usage_after"] == 0.25


TOKENS_BEFORE = """# TYPE vllm:prompt_tokens counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 1000.0
# TYPE vllm:generation_tokens counter
vllm:generation_tokens_total{engine="0",model_name="m"} 500.0
"""


def test_token_cross_check_agrees_and_names_a_difference():
    before = sb.read_prometheus(TOKENS_BEFORE)
    after = sb.read_prometheus(TOKENS_BEFORE.replace("1000.0", "1120.0").replace("} 500.0", "} 596.0"))
    agree = sb.token_cross_check(before, after, client_prompt_tokens=120, client_completion_tokens=96)
    assert agree == {
        "metrics_prompt_tokens": 120,
        "metrics_completion_tokens": 96,
        "client_prompt_tokens": 120,
        "client_completion_tokens": 96,
        "metrics_agree": True,
    }
    assert sb.cross_check_line(agree) == "Token counts: client 96 completion / 120 prompt tokens, vLLM's /metrics 96 / 120: they agree."
    # A watch's one-token probe during the run, or a request the client lost: the engine counted more.
    differ = sb.token_cross_check(before, after, client_prompt_tokens=110, client_completion_tokens=95)
    assert differ["metrics_agree"] is False
    assert sb.cross_check_line(differ).startswith("Token counts DIFFER: client 95 completion / 110 prompt tokens, vLLM's /metrics 96 / 120")
    # Without /metrics there is nothing to say.
    assert sb.cross_check_line({"scenario": "small"}) is None
    # Two engines (data parallel) are summed.
    two = TOKENS_BEFORE + 'vllm:generation_tokens_total{engine="1",model_name="m"} 7.0\n'
    assert sb.read_prometheus(two)["vllm:generation_tokens_total"] == 507.0
