"""stream_client's StreamConnection over real loopback sockets, against a TEST DOUBLE of a server.

The double replays streams recorded from a real vLLM 0.32 CPU server (tests/data/streams) the ways a
server may send them (chunked, cut short, stalled, not HTTP at all); the live vLLM runs are in
tests/integration/test_stream_bench_live.py.
"""

import asyncio
import json
import pathlib

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import stream_bench as sb
from ansible_collections.sparkfleet.vllm.plugins.module_utils import stream_client

STREAMS = pathlib.Path(__file__).parents[1] / "data" / "streams"
BODY = {"model": "glm-5.3-flash", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def recorded(name: str) -> bytes:
    rows = [json.loads(line) for line in (STREAMS / f"{name}.jsonl").read_text().splitlines()][1:]
    return "".join(row["line"] + "\n" for row in rows).encode()


def line_path_figures(stream: bytes) -> dict:
    """What the record of one whole read (the decoder's line path) says: the reference for any other split."""
    rec, decoder = sb.StreamRecord(0.0), sb.SSEDecoder()
    rec.status = 200
    for data in decoder.feed_bytes(stream):
        rec.feed_data(data, 1.0)
    rec.finish(1.0)
    return rec


def chunked(pieces: list[bytes]) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n"


class DoubleServer:
    """Answers each request with the next scripted reply: async (request bytes, writer) -> keep the connection?"""

    def __init__(self, replies):
        self.replies = list(replies)
        self.requests: list[bytes] = []
        self.connections = 0

    async def handle(self, reader, writer):
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length"))
                self.requests.append(head + await reader.readexactly(length))
                keep = await self.replies.pop(0)(writer)
                await writer.drain()
                if not keep:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    async def run(self, scenario, **client_args):
        server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = stream_client.Client(
            f"http://127.0.0.1:{port}", client_args.pop("api_key", None), client_args.pop("timeout_s", 5.0), client_args.pop("headers", None)
        )
        try:
            async with server:
                return await scenario(client)
        finally:
            await client.close()


def sse_response(pieces: list[bytes], keep_alive: bool = True):
    async def reply(writer):
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        for piece in pieces:
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        return keep_alive

    return reply


def events_of(stream: bytes) -> list[bytes]:
    return [event + b"\n\n" for event in stream.split(b"\n\n") if event]


def test_one_event_per_chunk_and_chunks_split_anywhere_give_the_line_paths_figures_on_one_kept_connection():
    stream = recorded("thinking_on")
    reference = line_path_figures(stream).result()
    split = [stream[start : start + 7] for start in range(0, len(stream), 7)]  # lines and UTF-8 split
    server = DoubleServer([sse_response(events_of(stream)), sse_response(split)])

    async def scenario(client):
        return [await client.stream(BODY), await client.stream(BODY)]

    records = asyncio.run(server.run(scenario, api_key="k-1", headers={"X-Sparkfleet-Engine": "sparks"}))
    for rec in records:
        figures = rec.result()
        assert rec.error is None
        assert rec.done
        assert rec.status == 200
        for key in ("completion_tokens", "prompt_tokens", "token_chunks", "reasoning_chunks", "content_chunks", "finish_reason", "content_text"):
            assert figures.get(key) == reference.get(key), key
        assert rec.t_start <= rec.t_sent <= rec.t_first_token <= rec.t_end
    assert server.connections == 1  # the second stream reused the first one's connection
    head = server.requests[0].split(b"\r\n\r\n")[0].decode()
    assert head.startswith("POST /v1/chat/completions HTTP/1.1\r\n")
    assert "Authorization: Bearer k-1" in head
    assert "X-Sparkfleet-Engine: sparks\r\n" in head  # the engine the front door sends every request to
    assert "X-Request-Id: sparkfleet-bench-" in head
    assert json.loads(server.requests[0].split(b"\r\n\r\n", 1)[1]) == BODY


def test_an_http_error_names_its_status_and_body_and_the_connection_serves_the_next_stream():
    error = b'{"error":{"message":"max_tokens is too large","code":400}}'

    async def bad_request(writer):
        writer.write(b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(error), error))
        return True

    server = DoubleServer([bad_request, sse_response(events_of(recorded("thinking_off")))])

    async def scenario(client):
        return [await client.stream(BODY), await client.stream(BODY)]

    failed, served = asyncio.run(server.run(scenario))
    assert failed.status == 400
    assert failed.error == 'HTTP 400: {"error":{"message":"max_tokens is too large","code":400}}'
    assert served.error is None
    assert served.done
    assert server.connections == 1


def test_a_stream_cut_before_done_is_an_error_row_and_the_next_stream_reconnects():
    stream = recorded("closed_early")

    async def cut(writer):
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n" + stream)
        return False  # the body ends with the connection

    server = DoubleServer([cut, sse_response(events_of(recorded("thinking_off")))])

    async def scenario(client):
        return [await client.stream(BODY), await client.stream(BODY)]

    cut_short, served = asyncio.run(server.run(scenario))
    assert cut_short.error == "the server closed the stream before [DONE]"
    assert cut_short.result()["ok"] is False
    assert served.error is None
    assert served.done
    assert server.connections == 2


def test_a_stalled_stream_fails_at_the_timeout_and_its_connection_is_dropped():
    first = events_of(recorded("thinking_off"))[:2]

    async def stall(writer):
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        writer.write(chunked(first)[:-5])  # two events, then nothing: a wedged engine
        await writer.drain()
        await asyncio.sleep(3)
        return False

    server = DoubleServer([stall])

    async def scenario(client):
        rec = await client.stream(BODY)
        return rec, client.connections[0].reusable()

    rec, reusable = asyncio.run(server.run(scenario, timeout_s=0.5))
    assert rec.error == "no complete answer within the per-request timeout of 0.5 s"
    assert rec.token_chunks == line_path_figures(b"".join(first)).token_chunks  # what came before the stall is kept
    assert rec.t_end - rec.t_start < 2
    assert reusable is False


def test_an_answer_that_is_not_http_is_named():
    async def garbage(writer):
        writer.write(b"SSH-2.0-OpenSSH_9.6\r\n")
        return True

    server = DoubleServer([garbage])
    rec = asyncio.run(server.run(lambda client: client.stream(BODY)))
    assert rec.error.startswith("not an HTTP response: ")


def test_a_chunk_the_record_cannot_read_is_an_error_row_not_a_crash():
    server = DoubleServer([sse_response([b'data: {"choices": [7]}\n\n'])])
    rec = asyncio.run(server.run(lambda client: client.stream(BODY)))
    assert rec.error == "unreadable chunk in the stream: 'int' object has no attribute 'get'"


def test_a_server_that_closes_without_answering_is_named():
    async def hang_up(writer):
        return False

    server = DoubleServer([hang_up])
    rec = asyncio.run(server.run(lambda client: client.stream(BODY)))
    assert rec.error == "the server closed the connection without answering"


def test_a_connection_idle_longer_than_the_servers_keep_alive_is_not_reused(monkeypatch):
    monkeypatch.setattr(stream_client, "REUSE_IDLE_S", 0.0)
    stream = events_of(recorded("thinking_off"))
    server = DoubleServer([sse_response(stream), sse_response(stream)])

    async def scenario(client):
        return [await client.stream(BODY), await client.stream(BODY)]

    records = asyncio.run(server.run(scenario))
    assert all(rec.error is None for rec in records)
    assert server.connections == 2


def test_a_refused_connection_is_an_error_row_naming_the_url():
    async def scenario():
        client = stream_client.Client("http://127.0.0.1:9", None, 5.0)
        try:
            return await client.stream(BODY)
        finally:
            await client.close()

    rec = asyncio.run(scenario())
    assert rec.error.startswith("cannot connect: ")
    assert rec.error.endswith("(http://127.0.0.1:9)")


@pytest.mark.parametrize(
    ("url", "api_key", "message"),
    [
        ("192.168.100.11:8000", None, "url '192.168.100.11:8000' is not an http:// or https:// URL"),
        ("ftp://head/", None, "url 'ftp://head/' is not an http:// or https:// URL"),
        ("http://head:80000", None, "url 'http://head:80000': Port out of range"),
        ("http://head:8000", "key\r\nX-Evil: 1", "api_key contains a line break"),
    ],
)
def test_bad_url_or_key_is_refused_before_any_connection(url, api_key, message):
    with pytest.raises(sb.StreamBenchError, match=message.replace("+", r"\+")):
        stream_client.Client(url, api_key, 5.0)


@pytest.mark.parametrize("headers", [{"X-Engine": "sparks\r\nX-Evil: 1"}, {"X Engine": "sparks"}])
def test_a_header_that_would_split_the_request_is_refused_before_any_connection(headers):
    with pytest.raises(sb.StreamBenchError, match="a name of letters, digits and dashes and a value on one line"):
        stream_client.Client("http://head:8080", None, 5.0, headers)
