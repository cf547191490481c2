# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""The streaming benchmark's client: one keep-alive connection per concurrent stream, asyncio.

Streams are read by StreamConnection (httptools parses each response inside the read callback);
the few control requests (/v1/models, /metrics, /version, /tokenize) go through httpx.
run_benchmark() is what the stream_bench module calls; benchmarks/ and the integration tests
call it directly. The arithmetic lives in stream_bench.py.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import ssl
import time
import urllib.parse
import uuid

try:
    import httptools
    import httpx
except ImportError:  # pragma: no cover - the stream_bench module says so (missing_required_lib)
    httptools = httpx = None

try:
    # libuv's event loop (vLLM's own server runs on it): less of the client's CPU per streamed token goes to
    # the loop itself (benchmarks/stream_bench_vs_vllm_bench.py). Without it, asyncio's default loop.
    import uvloop
except ImportError:  # pragma: no cover - depends on the host
    uvloop = None

from ansible_collections.sparkfleet.vllm.plugins.module_utils.stream_bench import (
    SSEDecoder,
    StreamBenchError,
    StreamRecord,
    excerpt,
    read_prometheus,
    request_body,
    salted_pad,
    spec_decode_figures,
    summarise_wave,
    token_cross_check,
)

# What a 1,000-word pad cost in tokens decides how many words a target token count needs.
CALIBRATION_WORDS = 1000
# A stream's connection is reused only this soon after its last response: vLLM's server (uvicorn) closes a
# connection 5 s after a response (VLLM_HTTP_TIMEOUT_KEEP_ALIVE), and a request sent as it closes is lost. A
# connection not used yet has no such timer: open_connections' connections stay good however long the wave
# took to connect.
REUSE_IDLE_S = 2.0
CONNECT_TIMEOUT_S = 10.0


def png_data_url(width: int, height: int) -> str:
    """A PNG with shapes and text, as a data: URL (Pillow, a matplotlib dependency)."""
    try:
        from PIL import Image, ImageDraw
    except ImportError as exc:  # pragma: no cover - depends on the host
        raise StreamBenchError("the image scenario needs Pillow on the host that runs stream_bench (pip install pillow)") from exc
    image = Image.new("RGB", (width, height), (250, 250, 245))
    draw = ImageDraw.Draw(image)
    for i in range(8):
        x = i * width // 8
        draw.rectangle([x + 10, height // 3, x + width // 10, height - 20], fill=(40 + 25 * i, 90, 200 - 20 * i))
    draw.ellipse([width // 2 - 80, 20, width // 2 + 80, 180], outline=(200, 30, 30), width=6)
    draw.text((20, 20), "sparkfleet: four nodes, one engine", fill=(0, 0, 0))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def describe(exc: BaseException) -> str:
    """The error's own words, or its class when it has none (a bare timeout)."""
    return str(exc) or type(exc).__name__


class StreamConnection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection that streams chat completions, one at a time.

    httptools (the C parser under uvicorn, so under vLLM's own server) parses the response inside
    the read callback, so each SSE event is decoded and timed where its bytes arrive: no coroutine
    is woken per token. That is the client's CPU per streamed token: httpx over its own stack cost
    ~2.3x that of `vllm bench serve` and httpx over aiohttp ~1.1x; aiohttp alone ~0.7x, this ~0.4x
    (benchmarks/stream_bench_vs_vllm_bench.py, docs/benchmark.md). It is also the truer arrival time.
    """

    def __init__(self):
        self.transport: asyncio.Transport | None = None
        self.parser = None
        self.record: StreamRecord | None = None
        self.decoder: SSEDecoder | None = None
        self.answered: asyncio.Future | None = None
        self.status: int | None = None
        self.error_body: list[bytes] = []
        self.arrived = 0.0
        self.idle_since: float | None = None  # the end of its last response; None: not used yet

    def reusable(self) -> bool:
        fresh = self.idle_since is None or time.perf_counter() - self.idle_since < REUSE_IDLE_S
        return self.transport is not None and not self.transport.is_closing() and self.parser is None and fresh

    def send(self, request: bytes, record: StreamRecord) -> asyncio.Future:
        """Write one request; the future resolves to its record when the response ends, however it ends."""
        self.record, self.decoder, self.status, self.error_body = record, SSEDecoder(), None, []
        self.parser = httptools.HttpResponseParser(self)
        self.answered = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        record.t_sent = time.perf_counter()
        return self.answered

    def close(self) -> None:
        """Drop the connection and whatever it was reading (a timed-out stream's record says so)."""
        self.parser = None
        if self.transport is not None:
            self.transport.abort()

    # asyncio.Protocol
    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.arrived = time.perf_counter()
        if self.parser is None:  # bytes with no request in flight: nothing this client can read
            self.transport.abort()
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:  # a chunk our record could not read (raised in on_body)
            self._end(f"unreadable chunk in the stream: {describe(exc.__context__ or exc)}")
            self.transport.abort()
        except httptools.HttpParserError as exc:
            self._end(f"not an HTTP response: {describe(exc)}")
            self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self.parser is not None:
            # Mid-response: a stream cut (its record says so), or a body that ends with the connection.
            self._end(f"the connection was lost: {describe(exc)}" if exc else None)

    # httptools callbacks
    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        if self.status == 200:
            self.record.status = 200

    def on_body(self, body: bytes) -> None:
        if self.status != 200:
            self.error_body.append(body)
            return
        data = self.decoder.whole_event(body)
        if data is not None:
            self.record.feed_json(data, self.arrived)
        else:
            for event in self.decoder.feed_bytes(body):
                self.record.feed_data(event, self.arrived)

    def on_message_complete(self) -> None:
        keep_alive = self.parser.should_keep_alive()
        self._end()
        if not keep_alive:
            self.transport.close()

    def _end(self, error: str | None = None) -> None:
        record, t = self.record, time.perf_counter()
        if error:
            record.fail(error, t=t)
        elif self.status == 200:
            data = self.decoder.flush()
            if data is not None:
                record.feed_data(data, t)
            record.finish(t)
        elif self.status is None:
            record.fail("the server closed the connection without answering", t=t)
        else:
            text = b"".join(self.error_body).decode(errors="replace")
            record.fail(f"HTTP {self.status}: {text}", status=self.status, t=t)
        self.parser = None
        self.idle_since = t
        if not self.answered.done():
            self.answered.set_result(record)


class Client:
    """An httpx client for control requests, and one StreamConnection per concurrent stream ("slot").

    A connection per stream, opened before a wave (open_connections), because a shared pool queues:
    with 64 streams on one httpcore pool the last request left the client seconds after the first
    (measured), which is client-side queueing.
    """

    def __init__(self, base_url: str, api_key: str | None, timeout_s: float, headers: dict[str, str] | None = None):
        self.base_url = base_url.rstrip("/")
        if api_key and any(c in api_key for c in "\r\n"):
            raise StreamBenchError("api_key contains a line break: give the key alone, as the engine was started with it")
        for name, value in (headers or {}).items():
            if not name.replace("-", "").isalnum() or any(c in str(value) for c in "\r\n"):
                raise StreamBenchError(f"header {name!r}: a name of letters, digits and dashes and a value on one line, e.g. X-Sparkfleet-Engine: sparks")
        self.headers = {**{name: str(value) for name, value in (headers or {}).items()}, **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
        self.timeout_s = timeout_s
        url = urllib.parse.urlsplit(self.base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise StreamBenchError(f"url {base_url!r} is not an http:// or https:// URL; give the engine's base URL, e.g. http://192.168.100.11:8000")
        try:
            self.host, self.port = url.hostname, url.port or (443 if url.scheme == "https" else 80)
        except ValueError as exc:  # a port out of range or not a number
            raise StreamBenchError(f"url {base_url!r}: {exc}; give the engine's base URL, e.g. http://192.168.100.11:8000") from None
        self.ssl = ssl.create_default_context() if url.scheme == "https" else None
        # Everything of a streamed request but its length, its id and its body.
        self.request_head = (
            f"POST {url.path}/v1/chat/completions HTTP/1.1\r\nHost: {url.netloc}\r\nUser-Agent: sparkfleet-stream-bench\r\n"
            "Accept: text/event-stream\r\nContent-Type: application/json\r\n" + "".join(f"{name}: {value}\r\n" for name, value in self.headers.items())
        ).encode("latin-1")
        # The bench measures the engine, not a proxy in front of it: both paths connect directly.
        self.http = httpx.AsyncClient(
            base_url=self.base_url, headers=self.headers, timeout=httpx.Timeout(self.timeout_s, connect=min(CONNECT_TIMEOUT_S, self.timeout_s)), trust_env=False
        )
        self.connections: dict[int, StreamConnection] = {}

    async def connection(self, slot: int) -> StreamConnection:
        current = self.connections.get(slot)
        if current is not None and current.reusable():
            return current
        if current is not None:
            if current.parser is not None:
                raise RuntimeError(f"stream slot {slot} is already streaming: one stream per slot at a time")
            current.close()
        loop = asyncio.get_running_loop()
        _transport, connection = await asyncio.wait_for(
            loop.create_connection(StreamConnection, self.host, self.port, ssl=self.ssl), min(CONNECT_TIMEOUT_S, self.timeout_s)
        )
        self.connections[slot] = connection
        return connection

    async def close(self):
        for connection in self.connections.values():
            connection.close()
        await self.http.aclose()

    async def open_connections(self, count: int) -> None:
        """Connect `count` slots before a wave, so its requests leave together instead of each
        waiting for its own TCP handshake while earlier streams already run."""
        await asyncio.gather(*(self.connection(slot) for slot in range(count)), return_exceptions=True)

    async def stream(self, body: dict, slot: int = 0) -> StreamRecord:
        """One streamed chat completion. Never raises: what went wrong lands in the record."""
        record = StreamRecord(time.perf_counter())
        payload = json.dumps(body).encode()
        # vLLM logs it as the request's id: a row of the report can be found in the engine's log.
        request_id = f"sparkfleet-bench-{uuid.uuid4().hex[:16]}"
        try:
            connection = await self.connection(slot)
        except (OSError, asyncio.TimeoutError) as exc:
            record.fail(f"cannot connect: {describe(exc)} ({self.base_url})", t=time.perf_counter())
            return record
        request = self.request_head + b"Content-Length: %d\r\nX-Request-Id: %s\r\n\r\n" % (len(payload), request_id.encode()) + payload
        answered = connection.send(request, record)
        try:
            await asyncio.wait_for(answered, max(0.0, self.timeout_s - (time.perf_counter() - record.t_start)))
        except asyncio.TimeoutError:
            connection.close()
            record.fail(f"no complete answer within the per-request timeout of {self.timeout_s:g} s", t=time.perf_counter())
        return record

    async def metrics(self) -> dict | None:
        try:
            response = await self.http.get("/metrics")
        except httpx.HTTPError:
            return None
        if response.status_code != 200:
            return None
        return read_prometheus(response.text)

    async def version(self) -> str | None:
        """The vLLM version the server runs (its /version), for the report's provenance."""
        try:
            response = await self.http.get("/version")
            return str(response.json().get("version")) if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            return None

    async def tokens_per_word(self, model: str) -> float | None:
        """Calibrate the pad with the server's own tokenizer (vLLM's /tokenize)."""
        text = salted_pad("calibration", CALIBRATION_WORDS)
        try:
            response = await self.http.post("/tokenize", json={"model": model, "prompt": text})
            count = response.json().get("count") if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None
        return count / CALIBRATION_WORDS if count else None


async def preflight(client: Client, model: str) -> str | None:
    """Reachability, key and model name, checked once with a clear message instead of N error rows."""
    try:
        response = await client.http.get("/v1/models")
    except httpx.HTTPError as exc:
        return f"cannot reach {client.base_url}: {describe(exc)}; check the URL and that the engine is up"
    if response.status_code == 401:
        return f"{client.http.base_url} answered 401 Unauthorized: set the API key it was started with (api_key / engine_api_key)"
    if response.status_code != 200:
        return f"{client.http.base_url}/v1/models answered HTTP {response.status_code}: {excerpt(response.text)}"
    served = [entry.get("id") for entry in response.json().get("data", [])]
    if model not in served:
        return f"model {model!r} is not served at {client.http.base_url}; it serves: {', '.join(map(str, served)) or 'nothing'}"
    return None


def _prompts(name: str, scenario: dict, concurrency: int, run_id: str, words_per_token: float, image_url: str | None) -> list[dict]:
    bodies = []
    for index in range(concurrency):
        prompt = None
        if scenario.get("prompt_tokens"):
            # Salted per request: the prefix cache must not help any request of any wave.
            words = int(int(scenario["prompt_tokens"]) * words_per_token)
            prompt = salted_pad(f"{run_id}-{name}-{concurrency}-{index}", words) + scenario.get("prompt", "")
        bodies.append((prompt, image_url))
    return bodies


async def run_wave(client: Client, model: str, name: str, scenario: dict, concurrency: int, run_id: str, words_per_token: float, image_url: str | None):
    bodies = [request_body(model, scenario, prompt, image) for prompt, image in _prompts(name, scenario, concurrency, run_id, words_per_token, image_url)]
    await client.open_connections(concurrency)
    records = await asyncio.gather(*(client.stream(body, slot) for slot, body in enumerate(bodies)))
    results = []
    for index, rec in enumerate(records):
        figures = rec.result()
        figures.update({"scenario": name, "concurrency": concurrency, "index": index})
        results.append(figures)
    wave = summarise_wave(name, concurrency, results, [rec.t_sent for rec in records])
    return wave, results


async def run_benchmark_async(
    url: str,
    model: str,
    scenarios: list[tuple[str, dict]],
    levels: list[int],
    api_key: str | None = None,
    timeout_s: float = 300.0,
    warmup: bool = True,
    multimodal: bool = False,
    read_metrics: bool = True,
    on_request=None,
    headers: dict[str, str] | None = None,
) -> dict:
    client = Client(url, api_key, timeout_s, headers)
    try:
        problem = await preflight(client, model)
        if problem:
            return {"failed": True, "msg": problem, "waves": [], "skipped": [], "requests": 0}
        run_id = uuid.uuid4().hex[:12]
        server_version = await client.version()
        tokens_per_word = None
        if any(s.get("prompt_tokens") for dummy, s in scenarios):
            tokens_per_word = await client.tokens_per_word(model)
        words_per_token = 1 / tokens_per_word if tokens_per_word else 0.75
        waves, skipped, count = [], [], 0
        for name, scenario in scenarios:
            image_url = None
            if scenario.get("image"):
                if not multimodal:
                    skipped.append({"scenario": name, "reason": f"{model} is not served as a multimodal model (multimodal: false)"})
                    continue
                image_url = png_data_url(int(scenario["image"].get("width", 1280)), int(scenario["image"].get("height", 640)))
            if warmup:
                # One request first: kernels compile, encoders load; its figures are not kept.
                await client.stream(
                    request_body(model, scenario, salted_pad(f"{run_id}-warmup-{name}", 16) if scenario.get("prompt_tokens") else None, image_url)
                )
            before = await client.metrics() if read_metrics else None
            counted = {"prompt": 0, "completion": 0}
            for level in levels:
                first_try = None
                for salt in (run_id, f"{run_id}-again"):
                    wave, results = await run_wave(client, model, name, scenario, level, salt, words_per_token, image_url)
                    count += len(results)
                    # The server counts both tries' tokens, so the cross-check does too.
                    counted["prompt"] += sum(figures.get("prompt_tokens") or 0 for figures in results)
                    counted["completion"] += sum(figures.get("completion_tokens") or 0 for figures in results)
                    if on_request:
                        for figures in results:
                            on_request({**figures, "try": 1 if first_try is None else 2})
                    if first_try is not None or not wave["arrived_at_once"]:
                        break
                    first_try = wave
                if first_try is not None:
                    wave["rerun"] = (
                        f"second try: on the first, {first_try['arrived_at_once']} of {first_try['ok_count']} stream(s) arrived whole in one read, "
                        "so their decode could not be timed"
                    )
                waves.append(wave)
            after = await client.metrics() if before is not None else None
            if before is not None and after is not None:
                figures = {**spec_decode_figures(before, after), **token_cross_check(before, after, counted["prompt"], counted["completion"])}
                for wave in waves:
                    if wave["scenario"] == name:
                        wave.update(figures)
        return {"failed": False, "waves": waves, "skipped": skipped, "requests": count, "tokens_per_word": tokens_per_word, "server_version": server_version}
    finally:
        await client.close()


def run(coroutine):
    """Run the client's coroutine to its end on uvloop's event loop where installed, else asyncio's
    (uvloop.run, not asyncio.Runner: the controller's floor is Python 3.10, tests/config.yml)."""
    return uvloop.run(coroutine) if uvloop else asyncio.run(coroutine)


def run_benchmark(*args, **kwargs) -> dict:
    return run(run_benchmark_async(*args, **kwargs))
