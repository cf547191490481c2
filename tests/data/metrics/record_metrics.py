"""Record vLLM's /metrics pages for the engine_progress unit tests (busy or wedged).

Recorded from vLLM 0.32.0 (CPU build) serving the cpu profile's tiny model (benchmarks/vllm_cpu_server.py):
  busy_first.txt, busy_last.txt  read 1 s apart while four streamed completions of 15,000 tokens run
  idle.txt                       read after they ended: the same page twice is what a wedged engine's counters show

Usage: python tests/data/metrics/record_metrics.py
"""

import pathlib
import sys
import threading
import time

import httpx

HERE = pathlib.Path(__file__).parent
sys.path.insert(0, str(HERE.parents[2] / "benchmarks"))

import vllm_cpu_server  # noqa: E402


def stream(url):
    body = {"model": vllm_cpu_server.MODEL, "messages": [{"role": "user", "content": "Count."}], "max_tokens": 15000, "ignore_eos": True, "stream": True}
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=300) as response:
        for _line in response.iter_lines():
            pass


def main():
    with vllm_cpu_server.tiny_model_server() as (url, _model_dir):
        threads = [threading.Thread(target=stream, args=(url,)) for _unused in range(4)]
        for thread in threads:
            thread.start()
        time.sleep(2)
        (HERE / "busy_first.txt").write_text(httpx.get(url + "/metrics").text)
        time.sleep(1)
        (HERE / "busy_last.txt").write_text(httpx.get(url + "/metrics").text)
        for thread in threads:
            thread.join()
        (HERE / "idle.txt").write_text(httpx.get(url + "/metrics").text)


if __name__ == "__main__":
    main()
