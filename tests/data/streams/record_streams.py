"""Record real streams from a vLLM server for the stream_bench unit tests.

Each recording is JSON lines: a header {"request": ..., "status": ..., "server": ...}, then
one {"t": seconds since the request was sent, "line": raw SSE line} per line received.

Recorded from vLLM 0.32.0 (CPU build) serving the cpu profile's tiny model
(images/engine-cpu/make_tiny_model.py, --load-format dummy, --reasoning-parser glm45 or
deepseek_r1). Three recordings are derived from real ones, and say so in their header:
  reasoning_content.jsonl  thinking_on with `reasoning` renamed `reasoning_content` (the older
                           spelling, which vLLM 0.32 no longer sends)
  closed_early.jsonl       thinking_off cut before its usage chunk and [DONE] (a server that
                           closes the stream early)
  error_midstream.jsonl    thinking_off's first chunks, then vLLM's error object (the body of the
                           real HTTP 400 recorded in http_400.jsonl, in the form vLLM streams it), then [DONE]

Usage: python record_streams.py http://127.0.0.1:8011 MODEL_NAME
"""

import json
import pathlib
import sys
import time

import httpx

HERE = pathlib.Path(__file__).parent
QUESTION = "A widget factory makes 12 widgets per hour on each of 3 lines. How many widgets in 8 hours?"


def body(model, thinking, **extra):
    return {
        "model": model,
        "messages": [{"role": "user", "content": "Reply with exactly: PING-OK" if not thinking else QUESTION}],
        "max_tokens": 48,
        "stream": True,
        "stream_options": {"include_usage": True},
        "chat_template_kwargs": {"enable_thinking": thinking},
        "seed": 7,
        **extra,
    }


def record(url, request):
    lines = []
    t0 = time.perf_counter()
    with httpx.stream("POST", url + "/v1/chat/completions", json=request, timeout=120) as response:
        for line in response.iter_lines():
            lines.append({"t": round(time.perf_counter() - t0, 6), "line": line})
        status = response.status_code
        server = response.headers.get("server")
    return {"request": request, "status": status, "server": server}, lines


def write(name, header, lines):
    with open(HERE / f"{name}.jsonl", "w", encoding="utf-8") as handle:
        for row in [header, *lines]:
            handle.write(json.dumps(row) + "\n")


def main(url, model):
    on = record(url, body(model, True))
    off = record(url, body(model, False))
    bad = record(url, body(model, False, tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}], tool_choice="required"))
    write("thinking_on", *on)
    write("thinking_off", *off)
    write("http_400", *bad)

    renamed = [{"t": row["t"], "line": row["line"].replace('"reasoning":', '"reasoning_content":')} for row in on[1]]
    write("reasoning_content", dict(on[0], derived="thinking_on with reasoning renamed reasoning_content"), renamed)

    data_rows = [row for row in off[1] if row["line"].startswith("data:")]
    usage_at = next(i for i, row in enumerate(off[1]) if '"usage"' in row["line"])
    write("closed_early", dict(off[0], derived="thinking_off cut before its usage chunk and [DONE]"), off[1][: usage_at - 1])

    error_body = "".join(row["line"] for row in bad[1])
    prefix = off[1][: off[1].index(data_rows[4]) + 2]
    t = prefix[-1]["t"]
    tail = [
        {"t": t + 0.001, "line": "data: " + error_body},
        {"t": t + 0.001, "line": ""},
        {"t": t + 0.002, "line": "data: [DONE]"},
        {"t": t + 0.002, "line": ""},
    ]
    write("error_midstream", dict(off[0], derived="thinking_off's first chunks, then the real 400 body as a streamed error, then [DONE]"), prefix + tail)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
