"""stream_bench against a real vLLM CPU server (conftest.py starts it), and its bad-input paths."""

import asyncio
import contextlib
import json
import os
import pathlib
import subprocess
import sys

import httpx
import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import stream_bench as sb
from ansible_collections.sparkfleet.vllm.plugins.module_utils import stream_client

ROOT = pathlib.Path(__file__).parents[2]
# Random weights can end an answer at its first token: ignore_eos keeps every answer measurable.
SCENARIOS = {name: dict(scenario, ignore_eos=True) for name, scenario in sb.DEFAULT_SCENARIOS.items()}
SCENARIOS["large"] = dict(SCENARIOS["large"], prompt_tokens=1500)
SCENARIOS["reasoning"] = dict(SCENARIOS["reasoning"], max_tokens=96, temperature=1.0)


def run(server, names, levels, **kwargs):
    base, key, model = server
    options = {"api_key": key, "timeout_s": 120}
    options.update(kwargs)
    return stream_client.run_benchmark(base, model, [(n, SCENARIOS[n]) for n in names], levels, **options)


def test_small_and_reasoning_waves(vllm_server):
    out = run(vllm_server, ["small", "reasoning", "image"], [1, 3])
    assert not out["failed"], out.get("msg")
    waves = {(w["scenario"], w["concurrency"]): w for w in out["waves"]}
    assert set(waves) == {("small", 1), ("small", 3), ("reasoning", 1), ("reasoning", 3)}
    for wave in waves.values():
        assert wave["ok"] == f"{wave['concurrency']}/{wave['concurrency']}", wave["errors"]
        assert wave["ttft_s"] > 0
        assert wave["e2e_s"] >= wave["ttft_s"]
        # A decode rate needs time between the first and the last token as the client received them. On two
        # shared cores the API server can lag the engine and send a whole answer in one network read (seen in
        # CI, 32 one-token chunks in one read): such a wave runs once more, and if it came whole again there is no
        # rate (None, never 0) and no time per token.
        if wave["decode_tps"] is None:
            assert wave["tpot_ms"] is None, wave
            assert wave["arrived_at_once"], wave
            assert "rerun" in wave, wave
        else:
            assert wave["decode_tps"] > 0
        assert wave["prompt_tokens"] > 0
        assert wave["completion_tokens"] > 0
        # /metrics was read: KV usage is a number, and no spec decoding on this engine.
        assert wave["kv_cache_usage_after"] is not None
        assert wave["spec_decode_mean_accepted_length"] is None
        # The engine's own counters (/metrics, before and after the scenario's waves) count the tokens the
        # client summed from every request's usage: 1 + 3 requests of this scenario (and any second tries), nothing
        # else on the server.
        assert wave["metrics_agree"] is True, wave
        assert wave["metrics_completion_tokens"] == wave["client_completion_tokens"] >= 4
        assert wave["metrics_prompt_tokens"] == wave["client_prompt_tokens"] >= 4 * wave["prompt_tokens"] * 0.9
    # Whether any live answer spans two reads is the machine's: beside two busy loops none did. The rate's arithmetic
    # through this client's reads is held by the paced replays below (a wave run once more, the thinking-on phases).
    assert out["skipped"] == [{"scenario": "image", "reason": "glm-5.3-flash is not served as a multimodal model (multimodal: false)"}]
    assert waves[("small", 1)]["reasoning_tokens"] == 0


def test_thinking_on_reports_first_token_and_first_content_apart(vllm_server):
    """The live server's answer with both phases, its own bytes, replayed one event per read (replay_server): how many
    reads a live answer comes in is the machine's timing, and on two contended cores the whole content phase came in
    one (CI, every seed of 120; reproduced beside two busy loops), which leaves no content window to divide by."""
    base, key, model = vllm_server
    seen = []
    # Random weights: a sampled answer closes </think> early in some seeds and never in others (about 1 in 5 here);
    # the first seed whose answer has both phases, read as the server wrote it.
    for seed in range(1, 121):
        body = sb.request_body(model, dict(SCENARIOS["reasoning"], seed=seed))
        with httpx.stream("POST", f"{base}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=120) as response:
            assert response.status_code == 200
            lines = list(response.iter_lines())
        live, decoder = sb.StreamRecord(t_start=0.0), sb.SSEDecoder()
        for line in lines:
            data = decoder.feed_line(line)
            if data is not None:
                live.feed_data(data, 0.0)
        if live.reasoning_chunks > 2 and live.content_chunks > 2:
            break
        seen.append((seed, live.reasoning_chunks, live.content_chunks))
    else:
        pytest.fail(f"no seed of 120 gave more than two chunks of reasoning and of content: (seed, reasoning, content): {seen}")

    async def replayed():
        async with replay_server(sse_events(lines), whole_in_one_write=lambda number: False) as (url, _unused):
            client = stream_client.Client(url, None, 30)
            try:
                return await client.stream(body)
            finally:
                await client.close()

    rec = asyncio.run(replayed())
    got = rec.result()
    assert got["ok"], got["error"]
    assert got["ttft_s"] < got["ttft_content_s"] <= got["e2e_s"]
    assert 0 < got["reasoning_tokens"] < got["completion_tokens"]
    # Content decode counts content tokens over content time only; the recipe's figure divides
    # all completion tokens (reasoning included) by the content time, so it is larger.
    content_window = rec.t_last_content - rec.t_first_content
    assert content_window > 0
    assert got["content_decode_tps"] == pytest.approx((got["content_tokens"] - 1) / content_window)
    assert got["recipe_decode_tps"] > got["content_decode_tps"]


def test_large_prompt_is_sized_and_salted(vllm_server):
    out = run(vllm_server, ["large"], [2])
    wave = out["waves"][0]
    assert wave["ok"] == "2/2", wave["errors"]
    assert 1400 <= wave["prompt_tokens"] <= 1700  # calibrated with the server's /tokenize
    assert wave["prefix_cache_hit_rate"] == pytest.approx(0.0, abs=0.02)  # salted: nothing to reuse
    assert wave["prefill_tps"] > 0


def test_sixty_four_streams_all_complete(vllm_server):
    # How closely together they leave the client is a speed figure: benchmarks/stream_bench_vs_vllm_bench.py prints it.
    out = run(vllm_server, ["small"], [64], warmup=False)
    wave = out["waves"][0]
    assert wave["ok"] == "64/64", wave["errors"]


def test_missing_key_and_wrong_key_are_named(vllm_server):
    base, _unused, model = vllm_server
    for key in (None, "wrong-key"):
        out = stream_client.run_benchmark(base, model, [("small", SCENARIOS["small"])], [1], api_key=key, timeout_s=30)
        assert out["failed"]
        assert "401 Unauthorized" in out["msg"]
        assert "API key" in out["msg"]


def test_wrong_model_lists_the_served_ones(vllm_server):
    base, key, _unused = vllm_server
    out = stream_client.run_benchmark(base, "glm-9", [("small", SCENARIOS["small"])], [1], api_key=key, timeout_s=30)
    assert out["failed"]
    assert out["msg"] == f"model 'glm-9' is not served at {base}; it serves: glm-5.3-flash"


def test_unreachable_url_is_named():
    out = stream_client.run_benchmark("http://127.0.0.1:9", "m", [("small", SCENARIOS["small"])], [1], timeout_s=5)
    assert out["failed"]
    assert out["msg"].startswith("cannot reach http://127.0.0.1:9: ")
    assert "connect" in out["msg"].lower()
    assert out["msg"].endswith("check the URL and that the engine is up")


def test_server_that_closes_early_gives_an_error_row():
    """A TEST DOUBLE of a misbehaving server: replays the real recorded stream cut before usage/[DONE]."""
    out, _unused = replay_server_run("closed_early", [2])
    wave = out["waves"][0]
    assert wave["ok"] == "0/2"
    assert wave["errors"][0]["error"] == "the server closed the stream before [DONE]"
    assert sb.check_thresholds(wave, {"ok_ratio_min": 1.0}) == ["small at concurrency 2: ok_ratio 0/2 is below the threshold 1.0 (ok_ratio_min)"]


def sse_events(lines):
    """SSE lines (as a server writes them, blank lines between events) -> the events, each without its blank line."""
    return "".join(line + "\n" for line in lines).encode().split(b"\n\n")


def recorded_lines(recording):
    return [json.loads(row)["line"] for row in (ROOT / f"tests/data/streams/{recording}.jsonl").read_text().splitlines()[1:]]


@contextlib.asynccontextmanager
async def replay_server(events, whole_in_one_write=lambda number: True):
    """A TEST DOUBLE of a server, or of a proxy that buffers: it answers each chat request with `events` (a real
    vLLM answer's), in one write where whole_in_one_write(request number) says so, else one event per write 20 ms
    apart. It runs on the client's own event loop, so a paced event is read before the next is written: the reads
    are the ones a machine with a core to spare gives. Yields (base URL, the chat requests it answered)."""
    models = json.dumps({"data": [{"id": "m"}]}).encode()
    chats = []

    async def handle(reader, writer):
        request = await reader.readuntil(b"\r\n\r\n")
        length = int(next((h.split(b":")[1] for h in request.split(b"\r\n") if h.lower().startswith(b"content-length")), b"0"))
        await reader.readexactly(length)
        if request.startswith(b"GET /v1/models"):
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(models), models))
        elif request.startswith(b"GET "):
            writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
        else:
            chats.append(request)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
            if whole_in_one_write(len(chats)):
                writer.write(b"\n\n".join(events))
            else:
                for event in events:
                    writer.write(event + b"\n\n")
                    await writer.drain()
                    await asyncio.sleep(0.02)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with server:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", chats


def replay_server_run(recording, levels, whole_in_one_write=lambda number: True):
    """The small scenario's waves at `levels` against replay_server of a recorded answer -> (outcome, chat requests)."""

    async def main():
        async with replay_server(sse_events(recorded_lines(recording)), whole_in_one_write) as (base, chats):
            out = await stream_client.run_benchmark_async(base, "m", [("small", SCENARIOS["small"])], levels, warmup=False, timeout_s=10)
            return out, chats

    return asyncio.run(main())


def test_a_wave_whose_stream_arrived_in_one_read_runs_once_more_and_says_so():
    out, chats = replay_server_run("thinking_off", [1, 2], whole_in_one_write=lambda number: number == 1)
    once_more, second = out["waves"]
    assert len(chats) == out["requests"] == 1 + 1 + 2
    assert once_more["rerun"] == "second try: on the first, 1 of 1 stream(s) arrived whole in one read, so their decode could not be timed"
    assert once_more["decode_tps"] > 0
    assert once_more["arrived_at_once"] == 0
    assert "rerun" not in second
    assert sb.check_thresholds(once_more, {"decode_tps_min": 0.5}) == []
    assert "small x1: " + once_more["rerun"] in sb.text_table(out["waves"])


def test_a_stream_buffered_on_both_tries_misses_its_decode_threshold_naming_why():
    out, chats = replay_server_run("thinking_off", [1])
    (wave,) = out["waves"]
    assert len(chats) == out["requests"] == 2
    assert wave["decode_tps"] is None
    assert "rerun" in wave
    (missed,) = sb.check_thresholds(wave, {"decode_tps_min": 0.5})
    assert "decode_tps was not measured (threshold min 0.5): 1 of 1 stream(s) arrived whole in one read, on both tries" in missed


def ansible_module(module, args, tmp_path):
    """Run a collection module the way a playbook does (ad hoc, on localhost)."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json")
    proc = subprocess.run(
        ["ansible", "localhost", "-i", "localhost,", "-c", "local", "-e", f"ansible_python_interpreter={sys.executable}", "-m", module, "-a", json.dumps(args)],
        capture_output=True,
        check=False,
        text=True,
        env=env,
        cwd=ROOT,
    )
    result = json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]
    return proc.returncode, result


def test_module_writes_jsonl_and_fails_on_a_missed_threshold(vllm_server, tmp_path):
    base, key, model = vllm_server
    jsonl = tmp_path / "bench.jsonl"
    args = {
        "url": base,
        "model": model,
        "api_key": key,
        "scenarios": ["small"],
        "concurrency": 2,
        "jsonl_path": str(jsonl),
        "thresholds": {"small": {"ok_ratio_min": 1.0, "ttft_s_max": 0.000001}},
    }
    rc, result = ansible_module("sparkfleet.vllm.stream_bench", args, tmp_path)
    assert rc != 0
    assert result["failed"]
    assert "small at concurrency 1: ttft_s" in result["msg"]
    assert "(ttft_s_max)" in result["msg"]
    assert key not in json.dumps(result)  # the API key is no_log
    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    # One request at concurrency 1, two at 2; a wave that arrived whole in one read ran twice (this tiny
    # model's 32 tokens often do), and the log holds both tries.
    rerun = {wave["concurrency"] for wave in result["waves"] if "rerun" in wave}
    assert len(lines) == result["requests"] == sum(level * (2 if level in rerun else 1) for level in (1, 2))
    assert {(line["concurrency"], line["try"]) for line in lines} == {(level, 1) for level in (1, 2)} | {(level, 2) for level in rerun}
    assert all(line["ok"] for line in lines)
    assert {"ttft_s", "ttft_content_s", "decode_tps", "gaps_ms"} <= set(lines[0])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"scenarios": ["small", "huge"]}, "scenario 'huge' does not exist; known scenarios: image, large, reasoning, small"),
        ({"concurrency": 0}, "concurrency 0 is not allowed"),
    ],
)
def test_module_bad_input_is_refused_before_any_request(change, message, tmp_path):
    args = {"url": "http://127.0.0.1:9", "model": "m", **change}
    rc, result = ansible_module("sparkfleet.vllm.stream_bench", args, tmp_path)
    assert rc != 0
    assert message in result["msg"]
