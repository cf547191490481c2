# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""The front door's admin side: HAProxy's runtime API (its stats socket), and the drain of an engine before a
planned stop.

A drain puts the engine's server in HAProxy's DRAIN state (new requests are not sent to it: with no other engine
the front door answers 503 with Retry-After at once), then waits while the requests it holds run to their end,
up to a timeout; what is still in flight then is cut (`shutdown sessions`), so that a client sees its stream
broken rather than a silent end. It says how many it waited for and how many it cut.
Pure Python, no Ansible imports; the socket and the clock are injectable for tests.
"""

from __future__ import annotations

import csv
import io
import socket
import time

# status_before of an engine this front door has no server for.
ABSENT = "absent"


class HaproxyAdminError(Exception):
    """The runtime API refused a command or did not answer."""


def command(socket_path, line, timeout=10.0):
    """One command on HAProxy's stats socket -> its answer (text). The socket closes after each answer."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(timeout)
            client.connect(socket_path)
            client.sendall(line.encode() + b"\n")
            chunks = []
            while True:
                chunk = client.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
    except OSError as error:
        raise HaproxyAdminError(f"HAProxy's runtime API at {socket_path} did not answer {line!r}: {error}") from error
    return b"".join(chunks).decode(errors="replace")


def servers(stat_csv):
    """`show stat` -> {(backend, server): {status, scur, qcur}} for every server row (not FRONTEND/BACKEND)."""
    text = stat_csv.lstrip("# ")
    rows = {}
    for row in csv.DictReader(io.StringIO(text)):
        name = row.get("svname")
        if not name or name in ("FRONTEND", "BACKEND"):
            continue
        rows[(row["pxname"], name)] = {"status": row.get("status", ""), "scur": int(row.get("scur") or 0), "qcur": int(row.get("qcur") or 0)}
    return rows


def queued(stat_csv, backend):
    """`show stat` -> the requests waiting in a backend's queue (every server's slots taken)."""
    for row in csv.DictReader(io.StringIO(stat_csv.lstrip("# "))):
        if row.get("pxname") == backend and row.get("svname") == "BACKEND":
            return int(row.get("qcur") or 0)
    raise HaproxyAdminError(f"The front door has no backend {backend}.")


class Admin:
    """The runtime API of one HAProxy (socket_path), with a send function tests can replace."""

    def __init__(self, socket_path, send=command):
        self.socket_path = socket_path
        self._send = send

    def run(self, line):
        answer = self._send(self.socket_path, line).strip()
        # Commands that change state answer nothing when they succeed; anything else is HAProxy's refusal.
        if line.startswith(("set server", "shutdown sessions")) and answer:
            raise HaproxyAdminError(f"HAProxy refused {line!r}: {answer}")
        return answer

    def find(self, backend, name):
        """The server's {status, scur, qcur}, or None when this front door has no such server."""
        return servers(self.run("show stat")).get((backend, name))

    def server(self, backend, name):
        found = self.find(backend, name)
        if found is None:
            raise HaproxyAdminError(f"The front door has no server {backend}/{name}: its configuration is not this engine's (run site.yml or lane.yml).")
        return found


def drain(admin, backend, name, timeout_s, interval_s=0.5, clock=time.monotonic, sleep=time.sleep):
    """Drain one engine's server: no new request reaches it, the ones it holds run to their end up to timeout_s,
    the rest are cut. -> {changed, waited_for, cut, seconds, status_before}. An engine the front door does not know
    yet (added to the inventory, or renamed, since its configuration was written) has nothing in flight through
    it: status_before is "absent" and nothing changes."""
    before = admin.find(backend, name)
    if before is None:
        return {"changed": False, "waited_for": 0, "cut": 0, "seconds": 0.0, "status_before": ABSENT}
    started = clock()
    if "DRAIN" not in before["status"] and "MAINT" not in before["status"]:
        admin.run(f"set server {backend}/{name} state drain")
    waited_for = before["scur"]
    current = before
    while current["scur"] > 0 and clock() - started < timeout_s:
        sleep(interval_s)
        current = admin.server(backend, name)
    cut = current["scur"]
    if cut:
        admin.run(f"shutdown sessions server {backend}/{name}")
    return {
        "changed": "DRAIN" not in before["status"] and "MAINT" not in before["status"],
        "waited_for": waited_for,
        "cut": cut,
        "seconds": round(clock() - started, 1),
        "status_before": before["status"],
    }


def ready(admin, backend, name):
    """Back in rotation after a drain (the health check still decides whether it is up). -> whether it changed.
    An engine the front door does not know has no rotation to go back to: unchanged."""
    before = admin.find(backend, name)
    if before is None or ("DRAIN" not in before["status"] and "MAINT" not in before["status"]):
        return False
    admin.run(f"set server {backend}/{name} state ready")
    return True
