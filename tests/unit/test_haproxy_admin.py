"""The front door's drain against HAProxy's runtime API (its `show stat` CSV as HAProxy 2.6 prints it)."""

from __future__ import annotations

import socket
import threading

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import haproxy_admin

HEADER = "# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,wredis,status,weight\n"


def _stat(status, scur, qcur=0):
    return (
        HEADER
        + "sparkfleet,FRONTEND,,,3,5,4096,40,1,2,0,0,0,,,,,OPEN,\n"
        + f"engines,sparks,{qcur},1,{scur},5,5,40,1,2,,0,,0,0,0,0,{status},1\n"
        + f"engines,BACKEND,{qcur},1,{scur},5,410,40,1,2,0,0,,0,0,0,0,UP,1\n"
    )


class FakeHaproxy:
    """The runtime API as a script: each `show stat` answers the next state; commands are recorded."""

    def __init__(self, states):
        self.states = list(states)
        self.commands = []

    def __call__(self, _path, line):
        self.commands.append(line)
        if line == "show stat":
            return _stat(*(self.states.pop(0) if len(self.states) > 1 else self.states[0]))
        return ""


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_show_stat_is_read_per_server_and_the_queue_per_backend():
    rows = haproxy_admin.servers(_stat("UP", 3, 1))
    assert rows == {("engines", "sparks"): {"status": "UP", "scur": 3, "qcur": 1}}
    assert haproxy_admin.queued(_stat("UP", 3, 2), "engines") == 2
    with pytest.raises(haproxy_admin.HaproxyAdminError, match="no backend other"):
        haproxy_admin.queued(_stat("UP", 3, 2), "other")


def test_a_drain_waits_for_the_streams_in_flight_and_cuts_none_when_they_end():
    fake, clock = FakeHaproxy([("UP", 2), ("DRAIN", 2), ("DRAIN", 1), ("DRAIN", 0)]), Clock()
    result = haproxy_admin.drain(haproxy_admin.Admin("/s", fake), "engines", "sparks", 60, interval_s=1, clock=clock, sleep=clock.sleep)
    assert result == {"changed": True, "waited_for": 2, "cut": 0, "seconds": 3.0, "status_before": "UP"}
    assert "set server engines/sparks state drain" in fake.commands
    assert not [line for line in fake.commands if line.startswith("shutdown sessions")]


def test_a_drain_cuts_what_runs_past_its_timeout_so_the_client_sees_it():
    fake, clock = FakeHaproxy([("UP", 3), ("DRAIN", 3)]), Clock()
    result = haproxy_admin.drain(haproxy_admin.Admin("/s", fake), "engines", "sparks", 5, interval_s=1, clock=clock, sleep=clock.sleep)
    assert (result["waited_for"], result["cut"], result["seconds"]) == (3, 3, 5.0)
    assert fake.commands[-1] == "shutdown sessions server engines/sparks"


def test_a_drained_engine_is_not_drained_again_and_ready_puts_it_back_once():
    fake = FakeHaproxy([("DRAIN", 0)])
    admin = haproxy_admin.Admin("/s", fake)
    assert haproxy_admin.drain(admin, "engines", "sparks", 5)["changed"] is False
    assert haproxy_admin.ready(admin, "engines", "sparks") is True
    assert fake.commands[-1] == "set server engines/sparks state ready"
    assert haproxy_admin.ready(haproxy_admin.Admin("/s", FakeHaproxy([("UP", 0)])), "engines", "sparks") is False


def test_an_engine_the_front_door_does_not_know_yet_has_nothing_to_drain_or_put_back():
    """An engine added to the inventory (or renamed) since the front door was configured: no request of it went
    through the front door, so its drain and its return change nothing and send no command."""
    fake = FakeHaproxy([("UP", 4)])
    admin = haproxy_admin.Admin("/s", fake)
    assert haproxy_admin.drain(admin, "engines", "second_pair", 60) == {
        "changed": False, "waited_for": 0, "cut": 0, "seconds": 0.0, "status_before": "absent",
    }  # fmt: skip
    assert haproxy_admin.ready(admin, "engines", "second_pair") is False
    assert fake.commands == ["show stat", "show stat"]


def test_an_unknown_server_and_a_refused_command_say_what_to_do():
    admin = haproxy_admin.Admin("/s", FakeHaproxy([("UP", 0)]))
    with pytest.raises(haproxy_admin.HaproxyAdminError, match=r"no server engines/other: its configuration is not this engine's \(run site.yml"):
        admin.server("engines", "other")
    refusing = haproxy_admin.Admin("/s", lambda _path, line: "" if line == "show stat" else "No such server.")
    with pytest.raises(haproxy_admin.HaproxyAdminError, match=r"HAProxy refused 'set server engines/sparks state ready': No such server."):
        refusing.run("set server engines/sparks state ready")


def test_the_socket_client_sends_one_line_and_reads_to_the_close(tmp_path):
    path = str(tmp_path / "admin.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    got = []

    def answer():
        connection, _unused = server.accept()
        with connection:
            got.append(connection.recv(1024))
            connection.sendall(_stat("UP", 1).encode())

    thread = threading.Thread(target=answer)
    thread.start()
    try:
        assert haproxy_admin.servers(haproxy_admin.command(path, "show stat"))[("engines", "sparks")]["scur"] == 1
    finally:
        thread.join(timeout=5)
        server.close()
    assert got == [b"show stat\n"]
    with pytest.raises(haproxy_admin.HaproxyAdminError, match="did not answer"):
        haproxy_admin.command(str(tmp_path / "none.sock"), "show stat")
