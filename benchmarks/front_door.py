#!/usr/bin/env python
"""Benchmark (not a test): what the front door adds to a stream, against the engine reached directly.

For each target (the engine's own port, the front door, and any other endpoint given with --also, such as a
vllm-router in front of the same engine) it streams the same chat completion at 1 and at N concurrent streams,
in alternating rounds so that the engine's drift falls on every target alike, and prints each target's median
time to first token and median time per token after the first, with its ratio to the direct engine's in the
same run.

With --stall NODE it then stops that node's rank (SIGSTOP: its processes stay, its health answers go on as long as
the head's do) and sends one stream through each target, printing what the client saw within --stall-s seconds:
the status, the tokens, and whether the target still answered /health, as a proxy's health check would see it.

Needs the simulated cluster up with the engine and its front door (`make demo`).
Usage: benchmarks/front_door.py [--rounds 5] [--streams 4] [--tokens 48] [--also NAME=URL ...] [--stall spark2]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import pathlib
import statistics
import subprocess
import sys
import time

import httpx

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "collections"))

from ansible_collections.sparkfleet.vllm.plugins.module_utils import stream_bench

HEAD = "192.168.100.11"
MODEL = "glm-5.3-flash"


def stream(url: str, tokens: int) -> tuple[float, float]:
    """One streamed chat completion -> (time to first token, seconds per token after it)."""
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Count slowly from one to one hundred."}],
        "max_tokens": tokens,
        "ignore_eos": True,
        "stream": True,
    }
    started, first, last, count = time.perf_counter(), None, None, 0
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=300) as response:
        response.raise_for_status()
        decoder = stream_bench.SSEDecoder()  # lines end at \n only: a model's text may hold \u2028 and the like
        for chunk in response.iter_bytes():
            for data in decoder.feed_bytes(chunk):
                if not data.startswith("{"):
                    continue
                choices = json.loads(data).get("choices") or [{}]
                delta = choices[0].get("delta", {})
                if delta.get("content") or delta.get("reasoning") or delta.get("reasoning_content"):  # thinking counts
                    last = time.perf_counter()
                    first = first or last
                    count += 1
    if first is None:
        raise RuntimeError(f"{url}: no token streamed")
    return first - started, (last - first) / max(count - 1, 1)


def wave(url: str, streams: int, tokens: int) -> list[tuple[float, float]]:
    with concurrent.futures.ThreadPoolExecutor(max_workers=streams) as pool:
        return list(pool.map(lambda _unused: stream(url, tokens), range(streams)))


def stalled(url: str, seconds: float) -> str:
    """One stream while a rank is stopped: what its client saw within `seconds`."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Say one word."}], "max_tokens": 8, "stream": True}
    status, tokens, started = None, 0, time.perf_counter()
    try:
        with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=seconds) as response:
            status = response.status_code
            decoder = stream_bench.SSEDecoder()
            for chunk in response.iter_bytes():
                tokens += sum(1 for data in decoder.feed_bytes(chunk) if data.startswith("{"))
        ending = f"ended after {time.perf_counter() - started:.1f} s"
    except httpx.TimeoutException:
        ending = f"nothing more within {seconds:.0f} s"
    except httpx.HTTPError as error:
        ending = f"{type(error).__name__} after {time.perf_counter() - started:.1f} s"
    try:
        health = httpx.get(f"{url}/health", timeout=5).status_code
    except httpx.HTTPError as error:
        health = type(error).__name__
    return f"status {status}, {tokens} chunk(s), {ending}; /health then: {health}"


def stall_row(node: str, targets: dict[str, str], seconds: float) -> None:
    """Each target's stream with node's rank stopped (SIGSTOP), then the rank let go on (SIGCONT)."""

    def signal(name: str) -> None:  # every process of the rank, as a wedged GPU leaves them: there, not running
        every = f"for pid in $(docker top vllm_glm53 -eo pid | tail -n +2); do kill -{name} $pid; done"
        subprocess.run(["docker", "exec", node, "sh", "-c", every], check=True, capture_output=True)

    signal("STOP")
    try:
        print(f"\nthe rank on {node} stopped (SIGSTOP): one stream through each target, {seconds:.0f} s each")
        for name, url in targets.items():
            print(f"  {name:<24} {stalled(url, seconds)}")
    finally:
        signal("CONT")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--streams", type=int, default=4, help="the concurrent streams of the second wave")
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--also", action="append", default=[], metavar="NAME=URL", help="another endpoint before the same engine")
    parser.add_argument("--stall", metavar="NODE", help="then stop this node's rank and stream through each target once")
    parser.add_argument("--stall-s", type=float, default=20.0, help="how long each client waits on the stopped engine")
    args = parser.parse_args()
    targets = {"engine (direct)": f"http://{HEAD}:8000", "front door (HAProxy)": f"http://{HEAD}:8080"}
    targets.update(dict(item.split("=", 1) for item in args.also))
    for url in targets.values():  # warm every path once (connections, the engine's first batch)
        stream(url, 4)
    for streams in (1, args.streams):
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in targets}
        for _round in range(args.rounds):
            for name, url in targets.items():
                samples[name].extend(wave(url, streams, args.tokens))
        direct_ttft = statistics.median(ttft for ttft, _unused in samples["engine (direct)"])
        direct_tpot = statistics.median(tpot for _unused, tpot in samples["engine (direct)"])
        print(f"\n{streams} stream(s) at once, {args.rounds} rounds, {args.tokens} tokens each")
        print(f"  {'target':<24} {'TTFT ms':>9} {'x direct':>9} {'ms/token':>9} {'x direct':>9}")
        for name, rows in samples.items():
            ttft = statistics.median(row[0] for row in rows)
            tpot = statistics.median(row[1] for row in rows)
            print(f"  {name:<24} {ttft * 1000:>9.1f} {ttft / direct_ttft:>9.3f} {tpot * 1000:>9.2f} {tpot / direct_tpot:>9.3f}")
    if args.stall:
        stall_row(args.stall, targets, args.stall_s)


if __name__ == "__main__":
    main()
