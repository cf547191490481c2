"""stream_bench against `vllm bench serve`, same server, same prompts, same concurrency, one run.

Prints, per round and as the median over rounds (the two clients alternate, so both see the
same server state):
  - median TTFT and median TPOT of each client, and ours/theirs (target: within 3%);
  - client CPU seconds per streamed token (target: ours <= half of theirs). Theirs is the
    `vllm bench serve` process's CPU between its "Starting main benchmark run" and its result
    banner (read from /proc), so its imports and tokenizer load are not counted; ours is this
    process's CPU time over the same part (the wave);
  - for 64 concurrent streams: the spread of the moments our requests' headers left the client
    (target: within 50 ms, no client-side queueing).

Usage: python benchmarks/stream_bench_vs_vllm_bench.py [--url URL --tokenizer DIR] [--rounds 3]
Without --url it starts a vLLM CPU server on the tiny model (benchmarks/vllm_cpu_server.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "collections"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import vllm_cpu_server  # noqa: E402

from ansible_collections.sparkfleet.vllm.plugins.module_utils import stream_bench as sb  # noqa: E402
from ansible_collections.sparkfleet.vllm.plugins.module_utils import stream_client  # noqa: E402

PROMPT = "Four nodes run one engine: the workers start first and the head starts last. Summarise that in one line."
CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_cpu_seconds(pid: int) -> float:
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime


def vllm_bench(url: str, model: str, tokenizer: str, concurrency: int, output_len: int, workdir: pathlib.Path) -> dict:
    dataset = workdir / "prompts.jsonl"
    dataset.write_text("".join(json.dumps({"prompt": PROMPT, "output_tokens": output_len}) + "\n" for _unused in range(concurrency)))
    vllm = shutil.which("vllm", path=os.path.dirname(sys.executable)) or "vllm"
    argv = [
        vllm, "bench", "serve",
        "--backend", "openai-chat", "--base-url", url, "--endpoint", "/v1/chat/completions",
        "--model", model, "--tokenizer", tokenizer,
        "--dataset-name", "custom", "--dataset-path", str(dataset), "--skip-chat-template",
        "--custom-output-len", str(output_len), "--num-prompts", str(concurrency),
        "--max-concurrency", str(concurrency), "--request-rate", "inf", "--ignore-eos",
        "--temperature", "0", "--chat-template-kwargs", '{"enable_thinking": false}',
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--disable-tqdm",
        "--save-result", "--result-dir", str(workdir), "--result-filename", "vllm-bench.json",
    ]  # fmt: skip
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    cpu_start = cpu_end = None
    output = []
    for line in process.stdout:
        output.append(line)
        if "Starting main benchmark run" in line:
            cpu_start = proc_cpu_seconds(process.pid)
        elif "Serving Benchmark Result" in line and cpu_end is None:
            cpu_end = proc_cpu_seconds(process.pid)
    if process.wait() != 0 or cpu_start is None or cpu_end is None:
        raise RuntimeError("vllm bench serve failed:\n" + "".join(output[-40:]))
    result = json.loads((workdir / "vllm-bench.json").read_text())
    return {
        "ok": f"{result['completed']}/{concurrency}",
        "median_ttft_ms": result["median_ttft_ms"],
        "median_tpot_ms": result["median_tpot_ms"],
        "tokens": result["total_output_tokens"],
        "cpu_s": cpu_end - cpu_start,
    }


def ours(url: str, model: str, concurrency: int, output_len: int) -> dict:
    scenario = {"prompt": PROMPT, "max_tokens": output_len, "thinking": False, "ignore_eos": True, "temperature": 0}

    async def wave():
        client = stream_client.Client(url, None, 300)
        try:
            await client.open_connections(concurrency)
            body = sb.request_body(model, scenario)
            cpu_start = time.process_time()
            records = await asyncio.gather(*(client.stream(body, slot) for slot in range(concurrency)))
            cpu = time.process_time() - cpu_start
        finally:
            await client.close()
        return records, cpu

    records, cpu = stream_client.run(wave())
    results = [rec.result() for rec in records]
    summary = sb.summarise_wave("compare", concurrency, results, [rec.t_sent for rec in records])
    return {
        "ok": summary["ok"],
        "median_ttft_ms": 1000 * summary["ttft_s"],
        "median_tpot_ms": summary["tpot_ms"],
        "tokens": sum(r["completion_tokens"] or 0 for r in results),
        "cpu_s": cpu,
        "start_spread_ms": summary["start_spread_ms"],
    }


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running vLLM server (default: start one on the tiny model)")
    parser.add_argument("--tokenizer", help="the model directory of --url's model (vllm bench needs its tokenizer)")
    parser.add_argument("--model", default=vllm_cpu_server.MODEL)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.url and not args.tokenizer:
        parser.error("--url needs --tokenizer (the model directory)")

    with contextlib.ExitStack() as stack:
        if args.url:
            url, tokenizer = args.url, args.tokenizer
        else:
            print("starting a vLLM CPU server on the tiny model ...", flush=True)
            url, model_dir = stack.enter_context(vllm_cpu_server.tiny_model_server())
            tokenizer = str(model_dir)
        workdir = pathlib.Path(stack.enter_context(tempfile.TemporaryDirectory()))
        # Warm the server (kernels, caches) with one wave of each before anything is counted.
        ours(url, args.model, args.concurrency, args.output_len)
        vllm_bench(url, args.model, tokenizer, args.concurrency, args.output_len, workdir)

        rows = []
        print(f"\n{args.concurrency} concurrent streams x {args.output_len} tokens, same prompt, temperature 0, ignore_eos; server {url}")
        print(f"{'round':>5}  {'client':<16} {'ok':>6} {'TTFT ms':>9} {'TPOT ms':>9} {'tokens':>7} {'CPU s':>7} {'CPU us/token':>13}")
        for index in range(1, args.rounds + 1):
            theirs = vllm_bench(url, args.model, tokenizer, args.concurrency, args.output_len, workdir)
            mine = ours(url, args.model, args.concurrency, args.output_len)
            for name, row in (("vllm bench serve", theirs), ("stream_bench", mine)):
                per_token = 1e6 * row["cpu_s"] / row["tokens"]
                print(
                    f"{index:>5}  {name:<16} {row['ok']:>6} {row['median_ttft_ms']:>9.1f} {row['median_tpot_ms']:>9.2f}"
                    f" {row['tokens']:>7} {row['cpu_s']:>7.3f} {per_token:>13.1f}"
                )
            rows.append((theirs, mine))

        def median(side, key, per_token=False):
            return statistics.median((r[side][key] / r[side]["tokens"]) if per_token else r[side][key] for r in rows)

        ttft = ratio(median(1, "median_ttft_ms"), median(0, "median_ttft_ms"))
        tpot = ratio(median(1, "median_tpot_ms"), median(0, "median_tpot_ms"))
        cpu = ratio(median(1, "cpu_s", True), median(0, "cpu_s", True))
        print(f"\nmedian over {args.rounds} rounds, stream_bench / vllm bench serve:")
        print(
            f"  TTFT  {median(1, 'median_ttft_ms'):8.1f} ms / {median(0, 'median_ttft_ms'):8.1f} ms = {ttft:.3f}"
            f"  (target within 3%: {'met' if abs(ttft - 1) <= 0.03 else 'NOT met'})"
        )
        print(
            f"  TPOT  {median(1, 'median_tpot_ms'):8.2f} ms / {median(0, 'median_tpot_ms'):8.2f} ms = {tpot:.3f}"
            f"  (target within 3%: {'met' if abs(tpot - 1) <= 0.03 else 'NOT met'})"
        )
        print(
            f"  client CPU per token {1e6 * median(1, 'cpu_s', True):.1f} us / {1e6 * median(0, 'cpu_s', True):.1f} us = {cpu:.3f}"
            f"  (target <= 0.5: {'met' if cpu <= 0.5 else 'NOT met'})"
        )

        spreads = [ours(url, args.model, 64, 16)["start_spread_ms"] for _unused in range(3)]
        print(
            f"\n64 concurrent streams: request headers left the client within {max(spreads):.1f} ms"
            f" (3 waves: {', '.join(f'{s:.1f}' for s in spreads)}; target 50 ms: {'met' if max(spreads) <= 50 else 'NOT met'})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
