# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Streaming benchmark arithmetic: SSE payloads in, per-request and per-wave figures out.

Pure functions and one small accumulator, no I/O: the stream_bench module feeds them what its
client reads (stream_client.py), the unit tests feed them streams recorded from a real vLLM server.

Definitions (and how they differ from the recipe's benchmark, which users quote):
- ttft_s: time to the first generated token of ANY kind (reasoning, content or tool call).
  The recipe counts content only, so with thinking on its TTFT contains all the thinking;
  that figure is kept as ttft_content_s.
- decode_tps: (completion_tokens - 1) / (last token - first token): every token after the
  first, over the time they took. content_decode_tps does the same for content tokens over
  the content phase, so reasoning tokens are never divided by content time.
- recipe_decode_tps: the recipe's completion_tokens / (e2e - ttft_content), kept only to
  compare with its published table (inflated when thinking is on).
- tpot_ms: vLLM's `bench serve` definition, (last token - first token) / (completion - 1).
- tokens_per_chunk: completion tokens / token-bearing chunks; speculative decoding makes a
  chunk carry several tokens, so inter-chunk gaps are not inter-token gaps.
- arrived_at_once: a stream of two or more token chunks that all came in one read. Its decode
  took no time the client could see: something buffered it (a proxy) or the client was not
  scheduled while it streamed (a head whose cores the engine holds). Such a wave runs once more.
"""

from __future__ import annotations

import itertools
import json
import math
import statistics

try:
    # vLLM's chunks decode in about a third of the stdlib's time: client CPU per streamed token
    # (benchmarks/stream_bench_vs_vllm_bench.py). Without it, the stdlib's decoder.
    from orjson import loads as json_loads
except ImportError:  # pragma: no cover - depends on the host
    json_loads = json.loads

# Keys of a chat delta that carry generated tokens. `reasoning` is what vLLM sends since
# early 2026; `reasoning_content` is the older spelling other servers still send.
REASONING_KEYS = ("reasoning", "reasoning_content")
TOKEN_KEYS = ("content", "tool_calls", *REASONING_KEYS)
ERROR_EXCERPT_CHARS = 300

# Figures a threshold may name: "<figure>_max" or "<figure>_min" (plus ok_ratio_min).
WAVE_FIGURES = (
    "ttft_s",
    "ttft_content_s",
    "e2e_s",
    "decode_tps",
    "content_decode_tps",
    "recipe_decode_tps",
    "prefill_tps",
    "tpot_ms",
    "tokens_per_chunk",
)


class StreamBenchError(ValueError):
    """Bad input to the benchmark (scenario, concurrency, thresholds)."""


class SSEDecoder:
    """Server-sent events, line by line (WHATWG rules vLLM's output needs): data lines of one
    event are joined with newlines, a blank line dispatches, comments and other fields are
    ignored. Returns the data of each finished event."""

    def __init__(self):
        self._data: list[str] = []
        self._partial = b""

    def whole_event(self, chunk: bytes) -> bytes | None:
        """The JSON data of a read that is exactly one whole `data: {...}` event with nothing pending,
        as vLLM writes each chunk; None for anything else (feed_bytes then goes line by line). The
        common read thus skips a pass per line: the client's CPU per streamed token."""
        if self._partial or self._data or not chunk.startswith(b"data: {") or not chunk.endswith(b"\n\n") or chunk.find(b"\n") != len(chunk) - 2:
            return None
        return chunk[6:-2]

    def feed_bytes(self, chunk: bytes) -> list[str]:
        """Raw bytes as they arrive (lines may be split anywhere): the events they complete.
        Splitting on b"\n" is safe in UTF-8."""
        data = self.whole_event(chunk)
        if data is not None:
            return [data.decode("utf-8", errors="replace")]
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        events = []
        for line in lines:
            data = self.feed_line(line.decode("utf-8", errors="replace"))
            if data is not None:
                events.append(data)
        return events

    def feed_line(self, line: str) -> str | None:
        line = line.rstrip("\r\n")
        if not line:
            if not self._data:
                return None
            data, self._data = "\n".join(self._data), []
            return data
        if line.startswith(":"):
            return None
        field, _unused, value = line.partition(":")
        if field == "data":
            self._data.append(value[1:] if value.startswith(" ") else value)
        return None

    def flush(self) -> str | None:
        """The last event of a stream that ended without its blank line."""
        if self._partial:
            self.feed_line(self._partial.decode("utf-8", errors="replace"))
            self._partial = b""
        return self.feed_line("")


def excerpt(text: str, limit: int = ERROR_EXCERPT_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class StreamRecord:
    """One request: feed it the decoded payloads with their arrival times (seconds, any
    monotonic clock), then call result()."""

    def __init__(self, t_start: float):
        self.t_start = t_start
        self.t_sent: float | None = None
        self.t_first_token: float | None = None
        self.t_first_content: float | None = None
        self.t_last_token: float | None = None
        self.t_last_content: float | None = None
        self.t_end: float | None = None
        self.chunk_times: list[float] = []
        self.token_chunks = 0
        self.reasoning_chunks = 0
        self.content_chunks = 0
        self.tool_call_chunks = 0
        self.usage: dict | None = None
        self.finish_reason: str | None = None
        self.done = False
        self.status: int | None = None
        self.error: str | None = None
        self.content_text: list[str] = []

    def fail(self, message: str, status: int | None = None, t: float | None = None) -> None:
        if self.error is None:
            self.error = excerpt(message)
        if status is not None:
            self.status = status
        if t is not None and self.t_end is None:
            self.t_end = t

    def feed_data(self, data: str, t: float) -> None:
        """One SSE event's data: a JSON chunk, or the [DONE] sentinel."""
        if data.strip() == "[DONE]":
            self.done = True
            self.t_end = t
            return
        self.feed_json(data, t)

    def feed_json(self, data: str | bytes, t: float) -> None:
        """One event's JSON data (SSEDecoder.whole_event hands it over as bytes, undecoded)."""
        try:
            payload = json_loads(data)
        except ValueError:
            text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
            self.fail(f"not JSON in the stream: {text}", t=t)
            return
        self.feed(payload, t)

    def feed(self, payload: dict, t: float) -> None:
        if not isinstance(payload, dict):
            self.fail(f"unexpected chunk: {payload!r}", t=t)
            return
        if payload.get("error"):
            # vLLM reports failures after the 200 header as an error object inside the stream.
            err = payload["error"]
            message = err.get("message", err) if isinstance(err, dict) else err
            code = err.get("code") if isinstance(err, dict) else None
            self.fail(f"error in the stream: {message}", status=code if isinstance(code, int) else None, t=t)
            return
        if payload.get("usage"):
            # The usage chunk comes last with empty `choices`: it must be read, not skipped.
            self.usage = payload["usage"]
        for choice in payload.get("choices") or ():
            delta = choice.get("delta") or {}
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
            self._feed_delta(delta, t)

    def _feed_delta(self, delta: dict, t: float) -> None:
        # Once per streamed token: the keys are read once each (TOKEN_KEYS, REASONING_KEYS).
        content, tool_calls = delta.get("content"), delta.get("tool_calls")
        reasoning, reasoning_content = delta.get("reasoning"), delta.get("reasoning_content")
        # vLLM's first chunk only announces the role (content ""): no token yet.
        if "role" in delta and not (content or tool_calls or reasoning or reasoning_content):
            return
        if content is None and tool_calls is None and reasoning is None and reasoning_content is None:
            return
        # A chunk can carry a token and no text (a UTF-8 fragment held back, or the
        # `</think>` that ends reasoning), so presence of the key counts, not its text.
        self.token_chunks += 1
        self.chunk_times.append(t)
        if self.t_first_token is None:
            self.t_first_token = t
        self.t_last_token = t
        if reasoning is not None or reasoning_content is not None:
            self.reasoning_chunks += 1
        if tool_calls:
            self.tool_call_chunks += 1
            self._content_at(t)
        if content:
            self.content_chunks += 1
            self.content_text.append(content)
            self._content_at(t)

    def _content_at(self, t: float) -> None:
        if self.t_first_content is None:
            self.t_first_content = t
        self.t_last_content = t

    def finish(self, t: float) -> None:
        """The stream is closed (by the server or by us)."""
        if self.t_end is None:
            self.t_end = t
        if self.error is None and not self.done:
            self.fail("the server closed the stream before [DONE]")

    def result(self) -> dict:
        return request_figures(self)


def _rate(tokens: float | None, seconds: float | None) -> float | None:
    if tokens is None or seconds is None or tokens <= 0 or seconds <= 0:
        return None
    return tokens / seconds


def _since(t: float | None, t0: float) -> float | None:
    return None if t is None else t - t0


def request_figures(rec: StreamRecord) -> dict:
    usage = rec.usage or {}
    prompt = usage.get("prompt_tokens")
    completion = usage.get("completion_tokens")
    details = usage.get("completion_tokens_details") or {}
    reasoning, reasoning_source = details.get("reasoning_tokens"), "usage"
    if completion is not None and (not rec.reasoning_chunks or not (rec.content_chunks or rec.tool_call_chunks)):
        # What the stream shows beats the usage count when one kind is absent: vLLM 0.32
        # reports reasoning_tokens > 0 for a thinking-off answer that is all content.
        reasoning, reasoning_source = (completion if rec.reasoning_chunks else 0), "stream"
    elif reasoning is None and completion and rec.token_chunks:
        # Older servers do not count reasoning tokens: share them out by chunks, and say so.
        reasoning, reasoning_source = round(completion * rec.reasoning_chunks / rec.token_chunks), "estimated from chunks"
    content_tokens = None if completion is None else completion - (reasoning or 0)

    t0 = rec.t_start
    ttft = _since(rec.t_first_token, t0)
    ttft_content = _since(rec.t_first_content, t0)
    e2e = _since(rec.t_end, t0)
    decode_window = None if rec.t_first_token is None else rec.t_last_token - rec.t_first_token
    content_window = None if rec.t_first_content is None else rec.t_last_content - rec.t_first_content
    gaps = [b - a for a, b in itertools.pairwise(rec.chunk_times)]

    # A stream that ended at once (end of sequence as the first token) is a success with no
    # timing figures (None, never 0); a stream without its usage chunk is not.
    ok = rec.error is None and rec.done and rec.usage is not None
    error = rec.error
    if error is None and not ok:
        error = "no usage chunk in the stream (was stream_options.include_usage dropped by a proxy?)"
    figures = {
        "ok": ok,
        "status": rec.status,
        "error": None if ok else error,
        "finish_reason": rec.finish_reason,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "reasoning_tokens": reasoning,
        "reasoning_tokens_source": reasoning_source,
        "content_tokens": content_tokens,
        "ttft_s": ttft,
        "ttft_content_s": ttft_content,
        "e2e_s": e2e,
        "queued_s": _since(rec.t_sent, t0),
        "decode_tps": _rate((completion or 0) - 1, decode_window),
        "content_decode_tps": _rate((content_tokens or 0) - 1, content_window) if rec.reasoning_chunks else None,
        "recipe_decode_tps": _rate(completion, None if e2e is None or ttft_content is None else e2e - ttft_content),
        "prefill_tps": _rate(prompt, ttft),
        "tpot_ms": None if not completion or completion < 2 or not decode_window else 1000 * decode_window / (completion - 1),
        "chunks": rec.token_chunks,
        "tokens_per_chunk": None if not completion or not rec.token_chunks else completion / rec.token_chunks,
        "gap_p50_ms": percentile_ms(gaps, 50),
        "gap_p90_ms": percentile_ms(gaps, 90),
        "gap_p99_ms": percentile_ms(gaps, 99),
        "gaps_ms": [round(1000 * g, 3) for g in gaps],
        "arrived_at_once": ok and rec.token_chunks >= 2 and decode_window == 0,
    }
    return figures


def percentile(values: list[float], pct: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default), so figures match vLLM's."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * pct / 100.0
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def percentile_ms(seconds: list[float], pct: float) -> float | None:
    value = percentile(seconds, pct)
    return None if value is None else 1000 * value


def _median(values: list) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def summarise_wave(scenario: str, concurrency: int, results: list[dict], sent_times: list[float] | None = None) -> dict:
    """Median of each figure over a wave's requests (ok ones), ok/n, pooled chunk gaps, the
    spread of the moments the requests' headers left the client, and the first errors."""
    good = [r for r in results if r["ok"]]
    gaps = [g / 1000 for r in good for g in r.get("gaps_ms", [])]
    wave = {
        "scenario": scenario,
        "concurrency": concurrency,
        "n": len(results),
        "ok_count": len(good),
        "ok": f"{len(good)}/{len(results)}",
        "ok_ratio": len(good) / len(results) if results else 0.0,
    }
    for figure in (*WAVE_FIGURES, "prompt_tokens", "completion_tokens", "reasoning_tokens"):
        wave[figure] = _median([r.get(figure) for r in good])
    wave["gap_p50_ms"] = percentile_ms(gaps, 50)
    wave["gap_p90_ms"] = percentile_ms(gaps, 90)
    wave["gap_p99_ms"] = percentile_ms(gaps, 99)
    sent = [t for t in (sent_times or []) if t is not None]
    wave["start_spread_ms"] = 1000 * (max(sent) - min(sent)) if len(sent) > 1 else 0.0
    wave["arrived_at_once"] = sum(1 for r in good if r.get("arrived_at_once"))
    errors = [r for r in results if not r["ok"]]
    wave["errors"] = [{"status": r.get("status"), "error": r.get("error")} for r in errors[:3]]
    return wave


def check_thresholds(wave: dict, thresholds: dict) -> list[str]:
    """Missed thresholds of one wave, each naming the figure, the threshold and the measured value.

    thresholds: {"ok_ratio_min": 1.0, "ttft_s_max": 5, "decode_tps_min": 1, ...}; a figure the wave
    could not measure (no ok request) counts as missed unless ok_ratio already failed.
    """
    missed = []
    where = f"{wave['scenario']} at concurrency {wave['concurrency']}"
    for key, limit in sorted(thresholds.items()):
        if limit is None:
            continue
        figure, _unused, bound = key.rpartition("_")
        if bound not in ("min", "max") or (figure not in WAVE_FIGURES and figure != "ok_ratio"):
            raise StreamBenchError(
                f"threshold {key!r} names no figure; use <figure>_min or <figure>_max with figure one of ok_ratio, {', '.join(WAVE_FIGURES)}"
            )
        measured = wave.get(figure)
        if measured is None:
            if wave["ok_count"] and wave.get("arrived_at_once"):
                missed.append(
                    f"{where}: {figure} was not measured (threshold {bound} {limit}): {wave['arrived_at_once']} of {wave['ok_count']} "
                    f"stream(s) arrived whole in one read{', on both tries' if wave.get('rerun') else ''} "
                    "(a proxy that buffers the stream, or a client not scheduled while it streamed)"
                )
            elif wave["ok_count"]:
                missed.append(f"{where}: {figure} was not measured (threshold {bound} {limit})")
            continue
        if (bound == "max" and measured > limit) or (bound == "min" and measured < limit):
            shown = wave["ok"] if figure == "ok_ratio" else f"{measured:.3f}"
            missed.append(f"{where}: {figure} {shown} is {'above' if bound == 'max' else 'below'} the threshold {limit} ({key})")
    return missed


def thresholds_for(scenario: str, concurrency: int, thresholds: dict, reference: dict | None, tolerance: float) -> dict:
    """The limits a wave must meet: those set for the scenario (and, under `by_concurrency`, for
    this concurrency), over limits derived from a published reference row with a tolerance."""
    limits = {}
    row = reference_row(reference, scenario, concurrency)
    if row:
        # Failed requests: as many as the published cell had (2/3 -> 0.666), none where it had none.
        limits["ok_ratio_min"] = published_ok_ratio(row.get("ok"))
        # The published figures use the recipe's definitions: content TTFT and its decode rate.
        if row.get("ttft_s") is not None:
            limits["ttft_content_s_max"] = round(row["ttft_s"] * (1 + tolerance), 3)
        if row.get("e2e_s") is not None:
            limits["e2e_s_max"] = round(row["e2e_s"] * (1 + tolerance), 3)
        if row.get("decode_tps") is not None:
            limits["recipe_decode_tps_min"] = round(row["decode_tps"] * (1 - tolerance), 3)
        if row.get("prefill_tps") is not None:
            limits["prefill_tps_min"] = round(row["prefill_tps"] * (1 - tolerance), 3)
    own = dict((thresholds or {}).get(scenario) or {})
    by_concurrency = own.pop("by_concurrency", None) or {}
    limits.update(own)
    limits.update(by_concurrency.get(concurrency) or by_concurrency.get(str(concurrency)) or {})
    return limits


def published_ok_ratio(ok) -> float:
    """A published cell's "ok" ("2/3") as the lowest ratio that still meets it, rounded down (0.666);
    1.0 where the cell names no failures (or no count)."""
    if not ok:
        return 1.0
    try:
        good, total = (int(part) for part in str(ok).split("/"))
    except ValueError:
        raise StreamBenchError(f"reference cell ok {ok!r} is not GOOD/TOTAL, e.g. 2/3") from None
    if total < 1 or not 0 <= good <= total:
        raise StreamBenchError(f"reference cell ok {ok!r} is not GOOD/TOTAL with 0 <= GOOD <= TOTAL")
    return math.floor(good / total * 1000) / 1000


def reference_row(reference: dict | None, scenario: str, concurrency: int) -> dict | None:
    for row in (reference or {}).get(scenario) or ():
        if int(row.get("conc", 0)) == concurrency:
            return row
    return None


def concurrency_levels(value) -> list[int]:
    """`5` means 1..5; a list is taken as given. 0, negatives and non-integers are refused."""
    levels = value if isinstance(value, (list, tuple)) else [value]
    checked = []
    for level in levels:
        try:
            number = int(level)
        except (TypeError, ValueError):
            raise StreamBenchError(f"concurrency {level!r} is not a whole number; use e.g. 5 (for 1..5) or [1, 2, 4]") from None
        if number < 1 or number != float(level):
            raise StreamBenchError(f"concurrency {level!r} is not allowed; use a whole number of at least 1, e.g. 5 (for 1..5) or [1, 2, 4]")
        checked.append(number)
    if not isinstance(value, (list, tuple)):
        return list(range(1, checked[0] + 1))
    return sorted(set(checked))


def select_scenarios(names: list[str], definitions: dict) -> list[tuple[str, dict]]:
    unknown = [name for name in names if name not in definitions]
    if unknown:
        raise StreamBenchError(f"scenario {', '.join(map(repr, unknown))} does not exist; known scenarios: {', '.join(sorted(definitions))}")
    if not names:
        raise StreamBenchError(f"no scenario selected; known scenarios: {', '.join(sorted(definitions))}")
    return [(name, definitions[name]) for name in names]


def salted_pad(salt: str, words: int) -> str:
    """A long prompt that no prefix cache can help with: the salt comes first, so even the
    first block differs between requests."""
    filler = ["the", "cluster", "streams", "tokens", "while", "four", "nodes", "share", "one", "engine", "and", "the", "head", "serves", "the", "API"]
    body = " ".join(filler[i % len(filler)] for i in range(max(words, 0)))
    return f"[{salt}] Read the notes below, then reply with one word.\n{body}\n"


def request_body(model: str, scenario: dict, prompt_override: str | None = None, image_url: str | None = None) -> dict:
    """The chat request of a scenario (streamed, usage included, thinking switched by data)."""
    text = prompt_override if prompt_override is not None else scenario.get("prompt", "")
    content = [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": image_url}}] if image_url else text
    body = {
        "model": model,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": int(scenario.get("max_tokens", 32)),
        "stream": True,
        "stream_options": {"include_usage": True},
        "chat_template_kwargs": {"enable_thinking": bool(scenario.get("thinking", False))},
    }
    for key in ("temperature", "seed", "ignore_eos", "top_p"):
        if key in scenario:
            body[key] = scenario[key]
    return body


def spec_decode_figures(before: dict, after: dict) -> dict:
    """Speculative decoding and KV usage from two Prometheus samples (name -> value, summed
    over engines). Mean accepted length counts the token the target model adds per step."""

    def delta(name):
        return after.get(name, 0.0) - before.get(name, 0.0)

    drafts = delta("vllm:spec_decode_num_drafts_total")
    draft_tokens = delta("vllm:spec_decode_num_draft_tokens_total")
    accepted = delta("vllm:spec_decode_num_accepted_tokens_total")
    queries = delta("vllm:prefix_cache_queries_total")
    return {
        "spec_decode_drafts": drafts,
        "spec_decode_acceptance_rate": accepted / draft_tokens if draft_tokens > 0 else None,
        "spec_decode_mean_accepted_length": 1 + accepted / drafts if drafts > 0 else None,
        "kv_cache_usage_before": before.get("vllm:kv_cache_usage_perc"),
        "kv_cache_usage_after": after.get("vllm:kv_cache_usage_perc"),
        "prefix_cache_hit_rate": delta("vllm:prefix_cache_hits_total") / queries if queries > 0 else None,
    }


def token_cross_check(before: dict, after: dict, client_prompt_tokens: int, client_completion_tokens: int) -> dict:
    """The engine's own token counters (its /metrics, read before and after a scenario's waves) against
    what the client counted from every request's usage. Two code paths of vLLM count them (the engine
    core's statistics, the API server's usage chunk), so a request that the client lost, double-counted
    or never saw finish shows as a difference; so does other traffic on the server meanwhile (a watch's probe)."""
    server_prompt = after.get("vllm:prompt_tokens_total", 0.0) - before.get("vllm:prompt_tokens_total", 0.0)
    server_completion = after.get("vllm:generation_tokens_total", 0.0) - before.get("vllm:generation_tokens_total", 0.0)
    return {
        "metrics_prompt_tokens": int(server_prompt),
        "metrics_completion_tokens": int(server_completion),
        "client_prompt_tokens": int(client_prompt_tokens),
        "client_completion_tokens": int(client_completion_tokens),
        "metrics_agree": int(server_prompt) == int(client_prompt_tokens) and int(server_completion) == int(client_completion_tokens),
    }


def cross_check_line(wave: dict) -> str | None:
    """One sentence of a scenario's token cross-check, or None where /metrics was not read."""
    if wave.get("metrics_agree") is None:
        return None
    counts = (
        f"client {wave['client_completion_tokens']} completion / {wave['client_prompt_tokens']} prompt tokens, "
        f"vLLM's /metrics {wave['metrics_completion_tokens']} / {wave['metrics_prompt_tokens']}"
    )
    if wave["metrics_agree"]:
        return f"Token counts: {counts}: they agree."
    return f"Token counts DIFFER: {counts} (other traffic on this server during the run, or requests the client did not count)."


WANTED_SAMPLES = (
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:spec_decode_num_drafts_total",
    "vllm:spec_decode_num_draft_tokens_total",
    "vllm:spec_decode_num_accepted_tokens_total",
    "vllm:kv_cache_usage_perc",
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
)


def read_prometheus(text: str, names: tuple[str, ...] = WANTED_SAMPLES) -> dict:
    """The samples `names` (by default the ones above) from a /metrics page, summed over engines and labels
    (KV usage: the highest)."""
    from prometheus_client.parser import text_string_to_metric_families

    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name not in names:
                continue
            if sample.name == "vllm:kv_cache_usage_perc":
                values[sample.name] = max(values.get(sample.name, 0.0), sample.value)
            else:
                values[sample.name] = values.get(sample.name, 0.0) + sample.value
    return values


# The recipe's four scenarios ("Benchmark method"); group_vars size the large one per profile.
DEFAULT_SCENARIOS = {
    "small": {"prompt": "Reply with exactly: PING-OK", "max_tokens": 32, "thinking": False},
    "reasoning": {
        "prompt": "A widget factory makes 12 widgets per hour on each of 3 lines. How many widgets in 8 hours? Explain briefly.",
        "max_tokens": 256,
        "thinking": True,
    },
    "large": {"prompt": "Reply with one word: done.", "prompt_tokens": 50000, "max_tokens": 48, "thinking": False},
    "image": {"prompt": "Describe this image in one sentence.", "image": {"width": 1280, "height": 640}, "max_tokens": 128, "thinking": False},
}

# (header, wave key, format) of the summary table; None prints as "-".
TABLE_COLUMNS = (
    ("scenario", "scenario", "{}"),
    ("conc", "concurrency", "{}"),
    ("ok", "ok", "{}"),
    ("ttft_s", "ttft_s", "{:.3f}"),
    ("ttft_content_s", "ttft_content_s", "{:.3f}"),
    ("e2e_s", "e2e_s", "{:.3f}"),
    ("decode_tps", "decode_tps", "{:.1f}"),
    ("content_tps", "content_decode_tps", "{:.1f}"),
    ("prefill_tps", "prefill_tps", "{:.0f}"),
    ("tok/chunk", "tokens_per_chunk", "{:.2f}"),
    ("gap_p99_ms", "gap_p99_ms", "{:.0f}"),
)


def cell(value, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def text_table(waves: list[dict], skipped: list[dict] | None = None) -> list[str]:
    rows = [[header for header, _unused, _unused in TABLE_COLUMNS]]
    rows += [[cell(wave.get(key), fmt) for _unused, key, fmt in TABLE_COLUMNS] for wave in waves]
    widths = [max(len(row[i]) for row in rows) for i in range(len(TABLE_COLUMNS))]
    lines = ["  ".join(value.rjust(width) if i >= 1 else value.ljust(width) for i, (value, width) in enumerate(zip(row, widths, strict=True))) for row in rows]
    lines += [f"skipped {entry['scenario']}: {entry['reason']}" for entry in skipped or ()]
    checked = {wave["scenario"]: cross_check_line(wave) for wave in waves if cross_check_line(wave)}
    lines += [f"{scenario}: {line}" for scenario, line in checked.items()]
    lines += [f"{wave['scenario']} x{wave['concurrency']}: {wave['rerun']}" for wave in waves if wave.get("rerun")]
    for wave in waves:
        lines += [f"errors in {wave['scenario']} x{wave['concurrency']}: HTTP {err['status'] or '-'}: {err['error']}" for err in wave.get("errors", ())]
    return lines
