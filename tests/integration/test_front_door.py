"""The front door's configuration (roles/front_door/templates) on a real HAProxy (the distribution's package, as the
role installs it) in front of a real vLLM CPU server: per-client keys, admission by the lane's slots with 429
past the queue, and a drain (plugins/module_utils/haproxy_admin.py) with 503 for new requests, a stream that runs
to its end, and one cut at the timeout that its client sees. (The drain that waits for a stream and turns new requests
away with 503 runs in molecule, around a real lane switch.)"""

from __future__ import annotations

import csv
import io
import pathlib
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse

import httpx
import jinja2
import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import haproxy_admin
from ansible_collections.sparkfleet.vllm.tests.support.chat_stream import stream_chat

ROOT = pathlib.Path(__file__).parents[2]
HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
CLIENTS = [{"name": "alice", "key": "alice-key-0123456789"}, {"name": "bob", "key": "bob-key-0123456789abc"}]
SLOTS, QUEUE, RETRY_AFTER = 1, 1, "7"
# A queued request waits while the stream before it writes its LONG tokens: beside molecule's verify, at a twentieth
# of a CPU group, that took longer than the role's default 60 s on a slow hour (the queued stream got 503), and once
# longer than the client's 120 s (it gave up before its answer's headers). The front door queues it and its client
# waits for it this long (molecule's inventory raises its own queue timeout for the same reason).
QUEUE_TIMEOUT_S = 600
# A stream the engine holds in flight while its client pauses: the tiny CPU model writes thousands of tokens a
# second, so a stream's length in time is the client's to decide. With 20 log-probabilities a chunk is about 2 KB,
# and 4000 of them are far more than the sockets between vLLM and the client buffer, so the engine's side stays open.
LONG = 4000


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _values(vllm_server, work, heads=("spark1",)):
    """The role's variables for a front door before the vLLM server, each of heads an engine of SLOTS slots there."""
    base, engine_key, _unused = vllm_server
    engine = urllib.parse.urlsplit(base)
    return {
        "ansible_managed": "Ansible managed",
        "front_door_admin_socket": str(work / "admin.sock"),
        "front_door_queue_timeout_s": QUEUE_TIMEOUT_S,
        "front_door_idle_timeout_s": 120,
        "front_door_bind_address": "127.0.0.1",
        "front_door_port": _free_port(),
        "front_door_retry_after_s": int(RETRY_AFTER),
        "front_door_queue_length": QUEUE,
        "front_door_heads": list(heads),
        "front_door_engine_port": engine.port,
        "front_door_clients": CLIENTS,
        "front_door_clients_map": str(work / "clients.map"),
        "front_door_access_log": "sparkfleet-access",
        "front_door_access_log_bytes": 65536,
        "front_door_engine_api_key": engine_key,
        "hostvars": {
            head: {
                "sparkfleet_engine_group": "sparks" if index == 0 else f"sparks{index + 1}",
                "sparkfleet_lane": {"name": "500k", "max_num_seqs": SLOTS},
                "sparkfleet_head_address": engine.hostname,
            }
            for index, head in enumerate(heads)
        },
    }


def _haproxy(work, values):
    """HAProxy with the role's configuration, rendered from values, once every engine is UP: (process, admin)."""
    # Rendered as the role's template task renders it (Ansible's default: trim_blocks).
    templates = jinja2.Environment(loader=jinja2.FileSystemLoader(ROOT / "roles/front_door/templates"), trim_blocks=True, keep_trailing_newline=True)
    for name, target in (("clients.map.j2", "clients.map"), ("haproxy.cfg.j2", "haproxy.cfg")):
        (work / target).write_text(templates.get_template(name).render(**values))
    subprocess.run([HAPROXY, "-c", "-f", str(work / "haproxy.cfg")], check=True, capture_output=True)
    process = subprocess.Popen([HAPROXY, "-db", "-f", str(work / "haproxy.cfg")], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    admin = haproxy_admin.Admin(values["front_door_admin_socket"])
    engines = [values["hostvars"][head]["sparkfleet_engine_group"] for head in values["front_door_heads"]]
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            if all(admin.server("engines", engine)["status"] == "UP" for engine in engines):
                return process, admin
        except haproxy_admin.HaproxyAdminError:
            pass
        time.sleep(0.2)
    process.terminate()
    pytest.fail(f"HAProxy did not mark every engine UP: {process.stderr.read1().decode(errors='replace') if process.poll() is not None else ''}")


@pytest.fixture(scope="module")
def front_door(vllm_server, tmp_path_factory):
    """HAProxy with the role's configuration for one engine (the vLLM server) of SLOTS slots: (url, admin, model)."""
    values = _values(vllm_server, tmp_path_factory.mktemp("front-door"))
    process, admin = _haproxy(pathlib.Path(values["front_door_admin_socket"]).parent, values)
    try:
        yield f"http://127.0.0.1:{values['front_door_port']}", admin, vllm_server[2]
    finally:
        process.terminate()
        process.wait(timeout=10)


def _body(model, tokens, stream=True):
    body = {"model": model, "messages": [{"role": "user", "content": "Count to a thousand."}], "max_tokens": tokens, "ignore_eos": True, "stream": stream}
    return body | ({"logprobs": True, "top_logprobs": 20} if stream else {})


def _stream(url, model, tokens, result, key=CLIENTS[0]["key"], resume=None):
    """A streamed completion through the front door (chat_stream.stream_chat), as client `key`: it waits for its answer
    as long as the front door may queue it."""
    stream_chat(url, _body(model, tokens), result, headers={"Authorization": f"Bearer {key}"}, timeout=QUEUE_TIMEOUT_S, resume=resume)


def _ask(url, model, key=CLIENTS[0]["key"]):
    return httpx.post(f"{url}/v1/chat/completions", json=_body(model, 1, stream=False), headers={"Authorization": f"Bearer {key}"} if key else {}, timeout=60)


def _wait_until(predicate, what, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    pytest.fail(f"not reached in {timeout} s: {what() if callable(what) else what}")


def test_only_a_clients_own_key_passes_and_the_engine_receives_its_own(front_door, vllm_server):
    url, admin, model = front_door
    for key in (None, "wrong-key-0123456789", vllm_server[1]):  # none, an unknown one, the engine's own
        refused = _ask(url, model, key=key)
        assert refused.status_code == 401, (key, refused.text)
        assert "This front door asks for your own API key" in refused.json()["error"]["message"]
    for client in CLIENTS:
        answered = _ask(url, model, key=client["key"])
        assert answered.status_code == 200, answered.text  # vLLM took the engine's key, which the front door sent
    counted = admin.run("show table clients")
    assert {"alice", "bob"} <= set(re.findall(r"key=(\w+) ", counted)), counted
    # The access log names each client, and no key; a refused key is no one's.
    logged = admin.run("show events sparkfleet-access")
    for client in CLIENTS:
        assert re.search(rf"client={client['name']} 127\.0\.0\.1 POST /v1/chat/completions 200 bytes=\d+ time_ms=\d+ engine=sparks$", logged, re.M), logged
        assert client["key"] not in logged
    assert len(re.findall(r"client=- 127\.0\.0\.1 POST /v1/chat/completions 401 .* engine=<NOSRV>$", logged, re.M)) >= 3, logged


def _engine_side(admin):
    """(requests the engine holds, requests queued) as HAProxy counts them; a runtime API that is slow to answer on
    a loaded machine reads as not yet."""
    try:
        stat = admin.run("show stat")
    except haproxy_admin.HaproxyAdminError as error:
        return str(error)
    return haproxy_admin.servers(stat)[("engines", "sparks")]["scur"], haproxy_admin.queued(stat, "engines")


def _wait_for_engine_side(admin, wanted, what):
    seen = []
    _wait_until(lambda: seen.append(_engine_side(admin)) or seen[-1] == wanted, lambda: f"{what}; seen {sorted(set(map(str, seen)))}")


def test_past_the_lanes_slots_a_request_waits_and_past_the_queue_gets_429(front_door):
    url, admin, model = front_door
    resume = threading.Event()
    streams = [{}, {}]
    threads = [threading.Thread(target=_stream, args=(url, model, LONG, result), kwargs={"resume": resume}) for result in streams]
    for thread in threads:
        thread.start()
    try:
        _wait_for_engine_side(admin, (SLOTS, QUEUE), "one in flight, one queued")
        refused = _ask(url, model)
    finally:
        resume.set()
        for thread in threads:
            thread.join()
    assert refused.status_code == 429, refused.text
    assert refused.headers["retry-after"] == RETRY_AFTER
    assert "Every sequence slot of the engines is taken and 1 requests already wait" in refused.json()["error"]["message"]
    assert [(result.get("status"), result["finish"], result["error"]) for result in streams] == [(200, "length", None)] * 2


def test_a_stream_past_the_drain_timeout_is_cut_and_its_client_sees_it(front_door):
    url, admin, model = front_door
    resume = threading.Event()
    in_flight = {}
    streamer = threading.Thread(target=_stream, args=(url, model, LONG, in_flight), kwargs={"resume": resume})
    streamer.start()
    try:
        _wait_until(lambda: in_flight.get("chunks"), "the stream's first tokens")
        _wait_for_engine_side(admin, (1, 0), "the stream in flight at the engine")
        drained = haproxy_admin.drain(admin, "engines", "sparks", 1)
    finally:
        resume.set()
        streamer.join()
        haproxy_admin.ready(admin, "engines", "sparks")
    assert (drained["waited_for"], drained["cut"]) == (1, 1), drained
    assert in_flight["error"], in_flight  # broken mid-body, not a stream that ends as if complete
    assert in_flight["finish"] is None


def test_a_request_naming_its_engine_goes_to_that_engine_only(vllm_server, tmp_path):
    """Two engines behind one front door (both the one vLLM server, under two names): a request with
    X-Sparkfleet-Engine, as the smoke benchmark sends, goes to the engine it names every time; one without it goes
    by load."""
    values = _values(vllm_server, tmp_path, heads=("spark1", "spark5"))
    process, admin = _haproxy(tmp_path, values)
    url, model = f"http://127.0.0.1:{values['front_door_port']}", vllm_server[2]
    try:

        def served():  # each engine's total of requests, from HAProxy's own `show stat`
            rows = csv.DictReader(io.StringIO(admin.run("show stat").lstrip("# ")))
            return {row["svname"]: int(row["stot"]) for row in rows if row["pxname"] == "engines" and row["svname"] in ("sparks", "sparks2")}

        before = served()
        for _unused in range(4):
            named = httpx.post(
                f"{url}/v1/chat/completions",
                json=_body(model, 1, stream=False),
                headers={"Authorization": f"Bearer {CLIENTS[0]['key']}", "X-Sparkfleet-Engine": "sparks2"},
                timeout=60,
            )
            assert named.status_code == 200, named.text
        assert served() == {"sparks": before["sparks"], "sparks2": before["sparks2"] + 4}
    finally:
        process.terminate()
        process.wait(timeout=10)
