# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""The streaming benchmark's client: httpx, asyncio, one connection per concurrent stream.

run_benchmark() is what the stream_bench module calls; benchmarks/ and the integration tests
call it directly. The arithmetic lives in stream_bench.py.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import time
import uuid

try:
    import httpx
except ImportError:  # pragma: no cover - the stream_bench module says so (missing_required_lib)
    httpx = None

try:
    # httpx's own pure-Python stack (httpcore, h11, anyio) cost ~2.3x the CPU per streamed token of
    # `vllm bench serve` (measured); the aiohttp transport of httpx's maintainers keeps httpx's API
    # over aiohttp's C parser. Without it, httpx's default transport is used.
    import aiohttp
    from httpx_aiohttp import AiohttpTransport
except ImportError:  # pragma: no cover - depends on the host
    AiohttpTransport = None

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


def describe(exc: Exception) -> str:
    """The error's own words (the aiohttp transport maps a refused connection to ConnectTimeout,
    so the class name alone would mislead), or its class when it has none."""
    return str(exc) or type(exc).__name__


class Client:
    """One httpx client for control requests, and one per concurrent stream ("slots").

    A slot per stream, each with a single keep-alive connection, because httpcore's shared pool
    re-scans every connection for every request: with 64 streams on one pool the last request
    left the client seconds after the first (measured), which is client-side queueing.
    """

    def __init__(self, base_url: str, api_key: str | None, timeout_s: float):
        self.base_url = base_url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.timeout_s = timeout_s
        # Requests whose headers have not left yet, by X-Request-Id (vLLM logs it as the request id).
        self.unsent: dict[str, StreamRecord] = {}
        self.http = self._client()
        self.slots: list[httpx.AsyncClient] = []

    def _client(self) -> httpx.AsyncClient:
        transport = None
        if AiohttpTransport:
            trace = aiohttp.TraceConfig()
            trace.on_request_headers_sent.append(self._headers_sent)
            transport = AiohttpTransport(client=lambda: aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1), trace_configs=[trace]))
        return httpx.AsyncClient(
            base_url=self.base_url,
            headers=self.headers,
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            timeout=httpx.Timeout(self.timeout_s, connect=min(10.0, self.timeout_s)),
            transport=transport,
        )

    async def _headers_sent(self, session, context, params) -> None:
        rec = self.unsent.pop(params.headers.get("X-Request-Id", ""), None)
        if rec is not None and rec.t_sent is None:
            rec.t_sent = time.perf_counter()

    def slot(self, index: int) -> httpx.AsyncClient:
        while len(self.slots) <= index:
            self.slots.append(self._client())
        return self.slots[index]

    async def close(self):
        await asyncio.gather(self.http.aclose(), *(slot.aclose() for slot in self.slots))

    async def open_connections(self, count: int) -> None:
        """Connect `count` slots before a wave, so its requests leave together instead of each
        waiting for its own TCP handshake while earlier streams already run."""

        async def touch(index):
            with contextlib.suppress(httpx.HTTPError):
                await self.slot(index).get("/v1/models")

        await asyncio.gather(*(touch(index) for index in range(count)))

    async def stream(self, body: dict, slot: int = 0) -> StreamRecord:
        """One streamed chat completion. Never raises: what went wrong lands in the record."""
        rec = StreamRecord(time.perf_counter())

        async def trace(event, info):
            # When the request line actually leaves this client (httpcore transport): queueing shows here.
            if event == "http11.send_request_headers.started" and rec.t_sent is None:
                rec.t_sent = time.perf_counter()

        request_id = f"sparkfleet-bench-{uuid.uuid4().hex[:16]}"
        self.unsent[request_id] = rec

        decoder = SSEDecoder()
        try:
            async with asyncio.timeout(self.timeout_s):
                async with self.slot(slot).stream(
                    "POST", "/v1/chat/completions", json=body, headers={"X-Request-Id": request_id}, extensions={"trace": trace}
                ) as response:
                    if response.status_code != 200:
                        text = (await response.aread()).decode(errors="replace")
                        rec.fail(f"HTTP {response.status_code}: {text}", status=response.status_code, t=time.perf_counter())
                        return rec
                    rec.status = 200
                    async for chunk in response.aiter_raw():
                        arrived = time.perf_counter()
                        for data in decoder.feed_bytes(chunk):
                            rec.feed_data(data, arrived)
                    data = decoder.flush()
                    if data is not None:
                        rec.feed_data(data, time.perf_counter())
            rec.finish(time.perf_counter())
        except TimeoutError:
            rec.fail(f"no complete answer within the per-request timeout of {self.timeout_s:g} s", t=time.perf_counter())
        except httpx.HTTPError as exc:
            rec.fail(f"{describe(exc)} ({self.base_url})", t=time.perf_counter())
        self.unsent.pop(request_id, None)
        return rec

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
) -> dict:
    client = Client(url, api_key, timeout_s)
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
                wave, results = await run_wave(client, model, name, scenario, level, run_id, words_per_token, image_url)
                count += len(results)
                counted["prompt"] += sum(figures.get("prompt_tokens") or 0 for figures in results)
                counted["completion"] += sum(figures.get("completion_tokens") or 0 for figures in results)
                if on_request:
                    for figures in results:
                        on_request(figures)
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
