# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Fan a byte stream out along a chain of nodes: the head sends each byte once.

The head runs a *source* command (``docker save IMAGE``, ``tar -cf - FILES``)
and sends its output to the first worker; each worker hands what it receives
to its own *sink* command (``docker load``, ``tar -xf -``) and, at the same
time, forwards it to the next worker. Head egress is one copy of the artifact
whatever the number of workers, and every hop runs at once, so the wall time
is about one copy's (recipe.md copies to each worker in turn: N copies, N
times the egress).

Every hop counts (and, when asked, hashes) what passed through it; the role
compares them with the head's, so a stream cut anywhere is found even when a
sink command accepted a short input. Hashing is off by default: the consumers
verify content themselves (docker load checks every layer's digest, weights
are checked against the sha256 manifest), and on a CPU-bound hop it costs time.
A status file (JSON, rewritten about once a second) lets the controller show
progress while the transfer runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import socket
import subprocess
import threading
import time

CHUNK_BYTES = 1 << 20


class FanoutError(Exception):
    """A hop failed; the message names the hop, the peer and what happened."""


class _Status:
    """Progress written atomically to a JSON file (read by the fanout_watch action)."""

    def __init__(self, path: str | None, expected_bytes: int) -> None:
        self.path = path
        self.expected_bytes = expected_bytes
        self.started = time.time()
        self._last_write = 0.0

    def write(self, transferred: int, state: str, **extra) -> None:
        if not self.path:
            return
        now = time.time()
        if state == "running" and now - self._last_write < 1.0:
            return
        self._last_write = now
        record = {
            "state": state,
            "bytes": transferred,
            "expected_bytes": self.expected_bytes,
            "started": self.started,
            "updated": now,
            **extra,
        }
        temporary = f"{self.path}.{os.getpid()}.tmp"
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(record, handle)
        os.chmod(temporary, 0o644)
        os.replace(temporary, self.path)


def _widen_pipe(descriptor: int) -> None:
    """1 MiB pipe to the sink instead of 64 KiB: one chunk per write, fewer switches (Linux only)."""
    try:
        import fcntl

        fcntl.fcntl(descriptor, getattr(fcntl, "F_SETPIPE_SZ", 1031), CHUNK_BYTES)
    except (ImportError, OSError):
        pass  # a smaller pipe only costs speed


def _connect(address: str, port: int, bind: str | None, wait_s: float) -> socket.socket:
    """Connect to the next hop, retrying while it is not listening yet (hops start in any order)."""
    deadline = time.monotonic() + wait_s
    last_error: OSError | None = None
    while time.monotonic() < deadline:
        try:
            return socket.create_connection((address, port), timeout=30, source_address=(bind, 0) if bind else None)
        except OSError as error:
            last_error = error
            time.sleep(0.5)
    raise FanoutError(f"could not reach the next hop {address}:{port} within {wait_s:.0f} s: {last_error}")


def _accept(address: str, port: int, wait_s: float) -> socket.socket:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((address, port))
    except OSError as error:
        listener.close()
        raise FanoutError(f"cannot listen on {address}:{port}: {error} (another transfer running?)") from error
    listener.listen(1)
    listener.settimeout(wait_s)
    try:
        connection, _unused = listener.accept()
    except TimeoutError as error:
        raise FanoutError(f"no upstream hop connected to {address}:{port} within {wait_s:.0f} s") from error
    finally:
        listener.close()
    return connection


def relay(
    *,
    source_command: str | None = None,
    listen: tuple[str, int] | None = None,
    forward: tuple[str, int] | None = None,
    bind: str | None = None,
    sink_command: str | None = None,
    status_path: str | None = None,
    expected_bytes: int = 0,
    connect_wait_s: float = 120.0,
    idle_timeout_s: float = 600.0,
    checksum: bool = True,
) -> dict:
    """Run one hop. Exactly one of source_command (the head) and listen (a worker).

    Returns bytes moved, the stream's sha256, seconds, and the sink's output.
    Raises FanoutError naming what failed; the sink is then killed, so a
    ``docker load`` never sees a short stream as complete.
    """
    if (source_command is None) == (listen is None):
        raise ValueError("give exactly one of source_command and listen")
    status = _Status(status_path, expected_bytes)
    status.write(0, "waiting")
    sink = downstream = upstream = source = None
    digest = hashlib.sha256()
    transferred = 0
    stderr_chunks: list[bytes] = []
    try:
        if forward is not None:
            downstream = _connect(forward[0], forward[1], bind, connect_wait_s)
            downstream.settimeout(idle_timeout_s)
        if sink_command is not None:
            sink = subprocess.Popen(shlex.split(sink_command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            _widen_pipe(sink.stdin.fileno())
            # Drain the sink's output as it comes so that it never blocks on a full pipe.
            reader = threading.Thread(target=lambda: stderr_chunks.append(sink.stdout.read()), daemon=True)
            reader.start()
        if source_command is not None:
            source = subprocess.Popen(shlex.split(source_command), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            read = source.stdout.read1 if hasattr(source.stdout, "read1") else source.stdout.read
        else:
            upstream = _accept(listen[0], listen[1], connect_wait_s)
            upstream.settimeout(idle_timeout_s)
            buffer = bytearray(CHUNK_BYTES)
            view = memoryview(buffer)

            def read(_size: int) -> bytes:
                count = upstream.recv_into(buffer)
                return view[:count]

        started = time.time()
        status.write(0, "running")
        while True:
            chunk = read(CHUNK_BYTES)
            if not chunk:
                break
            if checksum:
                digest.update(chunk)
            if downstream is not None:
                try:
                    downstream.sendall(chunk)
                except OSError as error:
                    raise FanoutError(f"the next hop {forward[0]}:{forward[1]} dropped the stream after {transferred} bytes: {error}") from error
            if sink is not None:
                try:
                    sink.stdin.write(chunk)
                except BrokenPipeError as error:
                    raise FanoutError(
                        f"the sink `{sink_command}` exited after {transferred} bytes: {b''.join(stderr_chunks).decode(errors='replace')[-400:]}"
                    ) from error
            transferred += len(chunk)
            status.write(transferred, "running")
        if source is not None:
            source_rc = source.wait()
            if source_rc != 0:
                raise FanoutError(f"the source `{source_command}` failed (exit {source_rc}): {source.stderr.read().decode(errors='replace')[-400:]}")
        status.write(transferred, "finishing")
        if sink is not None:
            sink.stdin.close()  # the sink finishes its tail while the next hops finish theirs
        if downstream is not None:
            downstream.shutdown(socket.SHUT_WR)
            # The next hop closes once its own sink and hops are done: the head's end is the chain's end.
            while downstream.recv(65536):
                pass
        sink_output = ""
        if sink is not None:
            sink_rc = sink.wait()
            reader.join(timeout=10)
            sink_output = b"".join(stderr_chunks).decode(errors="replace")
            if sink_rc != 0:
                raise FanoutError(f"the sink `{sink_command}` failed (exit {sink_rc}): {sink_output[-400:]}")
        finished = time.time()
        result = {
            "bytes": transferred,
            "sha256": digest.hexdigest() if checksum else "",
            "first_byte_at": started,
            "ended_at": finished,
            "seconds": round(finished - started, 3),
            "sink_output": sink_output.strip(),
        }
        status.write(transferred, "done", sha256=result["sha256"], seconds=result["seconds"])
        return result
    except (FanoutError, OSError) as error:
        message = str(error) if isinstance(error, FanoutError) else f"stream error after {transferred} bytes: {error}"
        status.write(transferred, "failed", error=message)
        if sink is not None and sink.poll() is None:
            sink.kill()
        if source is not None and source.poll() is None:
            source.kill()
        raise FanoutError(message) from error
    finally:
        for connection in (upstream, downstream):
            if connection is not None:
                connection.close()
        if sink is not None:
            if sink.poll() is None:
                sink.kill()
            sink.wait()
        if source is not None:
            if source.poll() is None:
                source.kill()
            source.wait()


def describe_progress(status: dict, chain: list[str]) -> str:
    """One line for the controller: the chain, bytes so far, rate, percentage when the size is known."""
    if status.get("state") == "finishing":
        return f"{' -> '.join(chain)}: all {status.get('bytes', 0) / 2**30:.2f} GiB sent; the workers' sinks are finishing"
    moved = status.get("bytes", 0)
    expected = status.get("expected_bytes") or 0
    elapsed = max(status.get("updated", 0) - status.get("started", 0), 1e-6)
    rate = moved / elapsed / 1e6
    share = f" ({min(100, moved * 100 // expected)}%)" if expected else ""
    return "{}: {:.2f} GiB{} of {}, {:.0f} MB/s".format(
        " -> ".join(chain),
        moved / 2**30,
        share,
        "%.2f GiB" % (expected / 2**30) if expected else "unknown size",
        rate,
    )
