"""Wait on the head until its API answers /health, then time the engine's first streamed token.

Gives up at once when the head's container stops or restarts, or a worker's node stops answering
(its SSH port), instead of waiting out the timeout. Right after /health answers it asks for one
streamed completion, the first request the new engine serves (so it pays for anything vLLM does
lazily at a first request), and prints when its first token came: that ends the engine's boot in the
readiness timeline, with nothing of ours between /health and the request.

Usage: python3 wait_ready.py CONTAINER HEALTH_URL TIMEOUT_S POLL_S MODEL [NAME=HOST:PORT ...]
  one NAME=HOST:PORT per worker. The API key, if the head has one, is read from the head container's
  environment (never from a command line, which every user of the node can read).
Prints "healthy after N s (at EPOCH)", then "first token at EPOCH" or "no first token: WHY" (exit 0);
exit 3: the head's container is not running; 4: not healthy in time; 5: a worker node is gone.
Standard library only: it runs on the node's own python3.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

PROMPT = "Reply with exactly: PING-OK"


def head_state(container: str) -> tuple[str, dict]:
    """The head container's 'STATUS RESTARTS' and environment, or ('missing 0', {})."""
    done = subprocess.run(["docker", "inspect", container], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return "missing 0", {}
    info = json.loads(done.stdout)[0]
    env = dict(entry.split("=", 1) for entry in info["Config"].get("Env") or [] if "=" in entry)
    return f"{info['State']['Status']} {info['RestartCount']}", env


def workers_gone(workers: list[str]) -> list[str]:
    gone = []
    for worker in workers:
        name, _unused, address = worker.partition("=")
        host, _unused, port = address.rpartition(":")
        for _attempt in range(2):
            try:
                socket.create_connection((host, int(port)), timeout=5).close()
                break
            except OSError:
                pass
        else:
            gone.append(f"{name} ({address})")
    return gone


def health_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0


def first_token_at(base_url: str, model: str, api_key: str, timeout_s: float) -> tuple[float | None, str]:
    """Epoch time of the first streamed token (content or reasoning), or None and why."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": 4,
        "stream": True,
        "chat_template_kwargs": {"enable_thinking": False},
    }
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = "Bearer " + api_key
    request = urllib.request.Request(base_url.rstrip("/") + "/v1/chat/completions", data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            # Server-sent events: one JSON chunk per `data:` line; a role-only chunk is not a token.
            for raw in response:
                line = raw.decode("utf-8", errors="replace").strip()
                if not line.startswith("data:"):
                    continue
                data = line[len("data:") :].strip()
                if data == "[DONE]":
                    break
                for choice in json.loads(data).get("choices") or []:
                    delta = choice.get("delta") or {}
                    if delta.get("content") or delta.get("reasoning") or delta.get("reasoning_content"):
                        return time.time(), ""
    except (OSError, ValueError) as error:
        return None, f"{type(error).__name__}: {error}"
    return None, "the stream ended without a token"


def main(argv: list[str]) -> int:
    container, health_url, timeout_s, poll_s, model, workers = argv[0], argv[1], int(argv[2]), float(argv[3]), argv[4], argv[5:]
    started = time.time()
    while True:
        state, env = head_state(container)
        if state != "running 0":
            print(f"the head's container is '{state}' instead of running")
            return 3
        gone = workers_gone(workers)
        if gone:
            print(f"worker node(s) stopped answering while the engine booted: {', '.join(gone)}")
            return 5
        status = health_status(health_url)
        if status == 200:
            print(f"healthy after {int(time.time() - started)} s (at {time.time():.3f})", flush=True)
            base_url = health_url.rsplit("/health", 1)[0]
            at, why = first_token_at(base_url, model, env.get("VLLM_API_KEY", ""), max(timeout_s - (time.time() - started), 60))
            print(f"first token at {at:.3f}" if at is not None else f"no first token: {why}")
            return 0
        if time.time() - started >= timeout_s:
            print(f"not healthy after {timeout_s} s (last /health status: {status})")
            return 4
        time.sleep(poll_s)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
