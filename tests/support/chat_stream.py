"""A streamed chat completion as its client sees it, for the tests that stream through the front door (the
integration tests and molecule's): the status, the chunks read, the finish reason, or the error that broke it."""

from __future__ import annotations

import json

import httpx

from ansible_collections.sparkfleet.vllm.plugins.module_utils import stream_bench


def stream_chat(url, body, result, headers=None, timeout=120, resume=None):
    """POST body (stream: true) to url's /v1/chat/completions and fill result with status, chunks, finish and error
    (None unless the stream broke: the exception as the client got it). With resume (an Event), the client stops
    reading after its first chunk until resume is set, so the engine keeps the stream in flight meanwhile."""
    result.update(chunks=0, finish=None, error=None)
    try:
        with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, headers=headers, timeout=timeout) as response:
            result["status"] = response.status_code
            decoder = stream_bench.SSEDecoder()  # lines end at \n only: a model's text may hold \u2028 and the like
            for chunk in response.iter_bytes():
                if resume is not None and result["chunks"]:
                    resume.wait(timeout=timeout)
                for data in decoder.feed_bytes(chunk):
                    if data.startswith("{"):
                        for choice in json.loads(data)["choices"]:
                            result["chunks"] += 1
                            result["finish"] = choice.get("finish_reason") or result["finish"]
    except httpx.HTTPError as error:
        result["error"] = f"{type(error).__name__}: {error}"
