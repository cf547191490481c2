"""The readiness timeline (module_utils/readiness): recorded cpu-profile logs, vLLM's GPU log lines,
the launch's wait timing a first token from a real HTTP server that streams, the module as Ansible runs
it, and the filter status.yml uses."""

from __future__ import annotations

import http.server
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import threading
import time

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import readiness

REPO = pathlib.Path(__file__).resolve().parents[2]
DATA = REPO / "tests/data/readiness"
MODULE = REPO / "plugins/modules/engine_timeline.py"
WAIT_READY = REPO / "roles/engine/files/wait_ready.py"


def _recorded_ranks() -> list[dict]:
    started = json.loads((DATA / "cpu-4rank-started.json").read_text())
    return [
        {"node": node, "rank": index, "started_at": started[node], "log": (DATA / f"cpu-4rank-{node}.log").read_text()}
        for index, node in enumerate(sorted(started))
    ]


def test_docker_timestamps_are_read_to_the_microsecond_and_the_zero_time_is_refused():
    assert readiness.parse_docker_time("2026-11-30T18:47:19.123456789Z") == pytest.approx(1796064439.123456, abs=1e-5)
    assert readiness.parse_docker_time("2026-11-30T19:47:19+01:00") == readiness.parse_docker_time("2026-11-30T18:47:19Z")
    with pytest.raises(readiness.TimelineError, match="never started"):
        readiness.parse_docker_time("0001-01-01T00:00:00Z")
    with pytest.raises(readiness.TimelineError, match="not a Docker timestamp"):
        readiness.parse_docker_time("11-30 18:47:19")


def test_a_recorded_cpu_launch_has_every_phase_in_order_on_the_head():
    timeline = readiness.build_timeline(_recorded_ranks(), engine="sparks", lane="500k", health_at=None, first_token_at=None)
    head = timeline["ranks"][0]
    assert head["rank"] == 0
    order = ["container_started", "process_up", "weights_loaded", "kv_cache_allocated", "graphs_compiled", "api_up"]
    times = [head[key] for key in order]
    assert None not in times, head
    assert times == sorted(times), head
    # The workers are headless: no API line, but their own weights and KV cache.
    for worker in timeline["ranks"][1:]:
        assert worker["api_up"] is None
        assert worker["weights_loaded"] is not None
        assert worker["kv_cache_allocated"] is not None
    assert min(row["container_started"] for row in timeline["ranks"]) == 0.0


def test_health_and_first_token_are_placed_after_the_first_container_start_and_the_longest_step_is_named():
    ranks = _recorded_ranks()
    zero = min(readiness.parse_docker_time(rank["started_at"]) for rank in ranks)
    timeline = readiness.build_timeline(ranks, engine="sparks", lane="500k", health_at=zero + 70.0, first_token_at=zero + 70.4)
    assert timeline["health"] == 70.0
    assert timeline["first_token"] == 70.4
    slowest = timeline["slowest"]
    assert slowest["seconds"] > 0
    assert slowest["to"] != "first streamed token"
    table = readiness.format_timeline(timeline)
    assert table[0].startswith("readiness of engine sparks, lane 500k")
    assert "first streamed token at 70.4 s" in table[-2]
    assert table[-1].startswith("longest step: ")
    assert len(table) == 2 + len(ranks) + 2


def _gpu_log(start: str = "2026-11-30T10:00:") -> str:
    # vLLM 0.32.0's format strings for the GPU path (no Spark log recorded yet: tests/data/readiness/README.md).
    return "\n".join(
        [
            f"{start}05.000000000Z (APIServer pid=1) INFO 11-30 10:00:05 [api_utils.py:286] non-default args: {{}}",
            f"{start}40.000000000Z (Worker_TP0 pid=9) INFO 11-30 10:00:40 [default_loader.py:502] Loading weights took 301.20 seconds",
            "2026-11-30T10:05:41.500000000Z (Worker_TP0 pid=9) INFO 11-30 10:05:41 [gpu_model_runner.py:5150] "
            "Model loading took 38.4 GiB memory and 305.900000 seconds",
            "2026-11-30T10:06:10.000000000Z (Worker_TP0 pid=9) INFO 11-30 10:06:10 [monitor.py:20] torch.compile took 22.10 s in total",
            "2026-11-30T10:06:30.000000000Z (Worker_TP0 pid=9) INFO 11-30 10:06:30 [gpu_worker.py:760] Available KV cache memory: 51.2 GiB",
            "2026-11-30T10:06:31.000000000Z (EngineCore pid=5) INFO 11-30 10:06:31 [kv_cache_utils.py:2328] "
            "GPU KV cache size: 2,516,480 tokens, Maximum concurrency for 500,000 tokens per request: 5.03x",
            "2026-11-30T10:12:31.000000000Z (Worker_TP0 pid=9) INFO 11-30 10:12:31 [gpu_model_runner.py:6582] "
            "Graph capturing finished in 360 secs, took 1.20 GiB",
            "2026-11-30T10:12:33.000000000Z (EngineCore pid=5) INFO 11-30 10:12:33 [core.py:402] "
            "init engine (profile, create kv cache, warmup model) took 412.10 s",
            "2026-11-30T10:12:35.000000000Z (APIServer pid=1) INFO 11-30 10:12:35 [entry.py:140] Starting vLLM server on http://0.0.0.0:8000",
        ]
    )


def test_gpu_phases_take_the_last_line_of_each_kind_so_graph_capture_ends_the_compile_phase():
    phases = readiness.rank_phases(_gpu_log())
    at = readiness.parse_docker_time
    assert phases["process_up"] == at("2026-11-30T10:00:05Z")
    assert phases["weights_loaded"] == at("2026-11-30T10:05:41.5Z")
    assert phases["kv_cache_allocated"] == at("2026-11-30T10:06:31Z")
    assert phases["graphs_compiled"] == at("2026-11-30T10:12:33Z")
    assert phases["api_up"] == at("2026-11-30T10:12:35Z")
    timeline = readiness.build_timeline(
        [{"node": "spark1", "rank": 0, "started_at": "2026-11-30T10:00:00Z", "log": _gpu_log()}],
        engine="sparks",
        lane="500k",
        health_at=at("2026-11-30T10:12:36Z"),
        first_token_at=at("2026-11-30T10:12:38Z"),
    )
    # Where a GB10's 12-15 minutes go: weights 5.6 min, then graph capture, the longest step here (6 min).
    assert timeline["slowest"] == {"from": "KV cache allocated", "to": "graphs captured / compile done", "seconds": 362.0}


def test_a_rank_without_a_start_time_is_named():
    with pytest.raises(readiness.TimelineError, match="spark3: the container has never started"):
        readiness.build_timeline(
            [{"node": "spark3", "rank": 2, "started_at": "0001-01-01T00:00:00Z", "log": ""}],
            engine="sparks",
            lane="1m",
            health_at=None,
            first_token_at=None,
        )


def test_the_status_filter_prints_the_table_and_names_a_file_that_is_not_a_timeline():
    # Imported here: the filter imports ansible.errors, whose patch of sys.intern breaks a later
    # torch import at collection time (tests/unit/test_serve_args_vllm_parser.py imports vLLM).
    from ansible_collections.sparkfleet.vllm.plugins.filter.readiness import FilterModule

    readiness_table = FilterModule().filters()["readiness_table"]

    timeline = readiness.build_timeline(_recorded_ranks(), engine="sparks", lane="500k", health_at=None, first_token_at=None)
    assert readiness_table(json.loads(json.dumps(timeline))) == readiness.format_timeline(timeline)
    with pytest.raises(Exception, match="not a readiness timeline"):
        readiness_table({"engine": "sparks"})


class _StreamingHandler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.server.authorization = self.headers.get("Authorization")
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        assert body["stream"] is True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        chunks = [{"choices": [{"delta": {"role": "assistant", "content": ""}}]}]
        chunks.append({"choices": [{"delta": {"content": "PING"}}]})
        self.wfile.write(f"data: {json.dumps(chunks[0])}\n\n".encode())
        self.wfile.flush()
        time.sleep(0.3)  # the role-only chunk must not count as the first token
        self.server.token_sent_at = time.time()
        self.wfile.write(f"data: {json.dumps(chunks[1])}\n\ndata: [DONE]\n\n".encode())

    def log_message(self, *args):
        return


def _wait_ready():
    """roles/engine/files/wait_ready.py, the launch's wait on the head (stdlib only), imported as a module."""
    spec = importlib.util.spec_from_file_location("wait_ready", WAIT_READY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_wait_times_the_first_streamed_token_not_the_role_only_chunk_and_sends_the_key():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _StreamingHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        sent = time.time()
        at, why = _wait_ready().first_token_at(f"http://127.0.0.1:{server.server_address[1]}", "glm-5.3-flash", "the-key", 30)
    finally:
        server.shutdown()
    assert why == ""
    assert at >= server.token_sent_at >= sent + 0.3
    assert server.authorization == "Bearer the-key"


def test_the_wait_says_why_there_is_no_first_token():
    at, why = _wait_ready().first_token_at("http://127.0.0.1:9", "m", "", 5)
    assert at is None
    assert why.startswith("URLError: ")


def test_the_module_places_the_waits_first_token_and_writes_the_timeline(tmp_path):
    path = tmp_path / "state" / "readiness.json"
    zero = min(readiness.parse_docker_time(rank["started_at"]) for rank in _recorded_ranks())
    attestation = {"engine": "sparks", "lane": "500k", "ranks": {"spark1": {"image_id": "sha256:aaa"}}}
    args = {
        "ranks": _recorded_ranks(),
        "engine": "sparks",
        "lane": "500k",
        "health_at": zero + 40.0,
        "first_token_at": zero + 42.26,
        "path": str(path),
        "attestation": attestation,
    }
    result = _run_module(args, tmp_path)
    assert result.get("failed") is not True, result
    written = json.loads(path.read_text())
    assert written == result["timeline"]
    assert (written["health"], written["first_token"]) == (40.0, 42.3)
    assert written["attestation"] == attestation
    assert "first_token_error" not in written
    assert result["table"] == readiness.format_timeline(written)


def test_the_module_records_why_there_is_no_first_token_and_still_writes_the_timeline(tmp_path):
    path = tmp_path / "readiness.json"
    args = {"ranks": _recorded_ranks(), "engine": "sparks", "lane": "500k", "first_token_error": "no first token: URLError: refused", "path": str(path)}
    result = _run_module(args, tmp_path)
    assert result.get("failed") is not True, result
    assert result["timeline"]["first_token"] is None
    assert result["timeline"]["first_token_error"] == "no first token: URLError: refused"
    assert json.loads(path.read_text())["first_token_error"] == result["timeline"]["first_token_error"]
    assert result["table"][-2].endswith("first streamed token at - (no first token: URLError: refused)")


def _run_module(args: dict, tmp_path: pathlib.Path) -> dict:
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=str(REPO / "collections"))
    done = subprocess.run([sys.executable, str(MODULE), str(args_file)], capture_output=True, text=True, env=env, timeout=60, check=False)
    return json.loads(done.stdout)


def test_each_rank_says_whether_its_compile_cache_was_warm_cold_or_not_used():
    """vLLM 0.32's own lines (vllm/compilation/backends.py): a graph compiled makes the rank cold, graphs loaded from
    the cache make it warm, none of them (eager, the cpu profile) is '-' (docs/warm-boots.md)."""
    stamp = "2026-11-30T10:06:0{}.000000000Z (Worker_TP0 pid=9) INFO 11-30 10:06:0{} [backends.py:{}] "
    cold = stamp.format(1, 1, 398) + "Compiling a graph for compile range (1, 8192) takes 41.20 s"
    warm = stamp.format(2, 2, 295) + "Directly load the compiled graph(s) for compile range (1, 8192) from the cache, took 1.804 s"
    aot = stamp.format(3, 3, 320) + "Directly load AOT compilation from path /cache/image/vllm/torch_compile_cache/0f1e/rank_0_0/model"
    assert readiness.compile_cache("\n".join([_gpu_log(), cold])) == "cold"
    assert readiness.compile_cache("\n".join([_gpu_log(), warm])) == "warm"
    assert readiness.compile_cache("\n".join([_gpu_log(), aot])) == "warm"
    assert readiness.compile_cache("\n".join([_gpu_log(), warm, cold])) == "cold"  # one graph compiled again
    # vLLM 0.32's words for an AOT artifact it could not load (seen on the CPU build): compiled again, cold.
    failed = stamp.format(4, 4, 100) + (
        "[backbone] Compiling model again due to a load failure from /cache/image/vllm/torch_compile_cache/torch_aot_compile/"
        "906f/rank_0_0/model, reason: 'function' object has no attribute 'finalize_loading'"
    )
    assert readiness.compile_cache("\n".join([_gpu_log(), failed])) == "cold"
    # torch's own cache lines, where TORCH_LOGS turns their loggers on (images/engine-cpu-compile; a rank's, as Docker
    # stamps them): every graph from inductor's and AOTAutograd's caches is warm, one missed is cold.
    torch_line = "2026-12-04T05:50:30.{}Z [rank0]:I1204 05:50:30.188000 24 torch/{}] [0/0] {} for key flqkd7xibgayvevhg3mdiroaumc3vxfx5bw3b2ppi3vqcng7w4wj"
    hits = [
        torch_line.format(1, "_inductor/codecache.py:2299", "fx graph cache hit"),
        torch_line.format(2, "_functorch/_aot_autograd/autograd_cache.py:1028", "AOTAutograd cache hit"),
    ]
    missed = torch_line.format(3, "_inductor/codecache.py:2316", "fx graph cache miss")
    assert readiness.compile_cache("\n".join([_gpu_log(), *hits])) == "warm"
    assert readiness.compile_cache("\n".join([_gpu_log(), *hits, missed])) == "cold"
    assert readiness.compile_cache(_gpu_log()) is None
    ranks = [
        {"node": "spark1", "rank": 0, "started_at": "2026-11-30T10:00:00Z", "log": "\n".join([_gpu_log(), warm])},
        {"node": "spark2", "rank": 1, "started_at": "2026-11-30T10:00:01Z", "log": _gpu_log()},
    ]
    table = readiness.format_timeline(readiness.build_timeline(ranks, "sparks", "500k", None, None))
    assert table[1].endswith("compile cache")
    assert table[2].endswith("warm")
    assert table[3].endswith("-")
    # A timeline written before this column (status.yml shows the last one again) reads as '-'.
    old = readiness.build_timeline(ranks, "sparks", "500k", None, None)
    for row in old["ranks"]:
        del row["compile_cache"]
    assert readiness.format_timeline(old)[2].endswith("-")
