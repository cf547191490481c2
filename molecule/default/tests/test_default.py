"""Verify the simulated cluster after converge (site.yml -e lane=500k).

Per node (testinfra, over SSH): the engine container runs with the lane's
flags and the node's rank. Once (from the controller): the head streams a
chat completion; a re-run from the recipe's cluster.env changes and restarts nothing; a lane switch restarts every rank
with the new flags and changes nothing else; stop.yml leaves nothing.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import hashlib
import json
import math
import os
import pathlib
import re
import shutil
import signal
import subprocess
import tarfile
import threading
import time
import urllib.parse

import httpx
import pytest
import yaml

from ansible_collections.sparkfleet.vllm.tests.support.chat_stream import stream_chat

REPO = pathlib.Path(__file__).resolve().parents[3]
INVENTORY = REPO / "molecule/resources/inventory/hosts.yml"
CONTAINER = "vllm_glm53"
RANKS = {"spark1": 0, "spark2": 1, "spark3": 2, "spark4": 3}
HEAD_API = "http://192.168.100.11:8000"
LANES = {"500k": ("500000", "5"), "200k": ("200000", "15"), "1m": ("1000000", "3")}
GIB = 1024**3
# The cpu profile (playbooks/group_vars/all/profiles.yml): KV = gmu x the node's memory cgroup limit - non_kv_gib.
GMU, NON_KV_GIB = 0.85, {"head": 1.2, "worker": 1.0}
PATCH_TARGET = "/opt/vllm/lib/python3.11/site-packages/vllm/model_executor/layers/indexer_topk.py"


def _container(host):
    result = host.run(f"sudo docker inspect {CONTAINER}")
    assert result.rc == 0, f"{host.backend.hostname}: no {CONTAINER} container: {result.stderr}"
    return json.loads(result.stdout)[0]


def _flag(args, name):
    assert name in args, f"{name} missing from {args}"
    return args[args.index(name) + 1]


def test_rank_runs_with_lane_flags(host):
    name = host.backend.get_hostname()
    container = _container(host)
    args = container["Args"]
    assert container["State"]["Running"], f"{name}: rank not running"
    assert container["RestartCount"] == 0
    assert args[:2] == ["vllm", "serve"]
    assert _flag(args, "--max-model-len") == LANES["500k"][0]
    assert _flag(args, "--max-num-seqs") == LANES["500k"][1]
    assert _flag(args, "--node-rank") == str(RANKS[name])
    assert _flag(args, "--nnodes") == "4"
    assert _flag(args, "--tensor-parallel-size") == "4"
    assert _flag(args, "--master-addr") == "192.168.100.11"
    assert ("--headless" in args) == (RANKS[name] > 0)
    assert container["Config"]["Labels"]["io.sparkfleet.lane"] == "500k"
    assert container["HostConfig"]["NetworkMode"] == "host"
    assert container["HostConfig"]["IpcMode"] == "host"
    # The cpu profile's patch (patches/manifest.yml), a whole file as the recipe mounts its own: written on the
    # node and mounted read-only over vLLM's file; what the rank's vLLM reads is that file, byte for byte.
    (mount,) = [m for m in container["Mounts"] if m["Destination"] == PATCH_TARGET]
    assert mount["RW"] is False
    assert mount["Source"].startswith("/opt/sparkfleet/patches/sm12x-persistent-topk-guard-file/")
    served = host.check_output(f"sudo docker exec {CONTAINER} sha256sum {PATCH_TARGET}").split()[0]
    assert served == hashlib.sha256((REPO / "patches/sm12x-persistent-topk-guard.indexer_topk.py.txt").read_bytes()).hexdigest()
    assert int(host.check_output(f"sudo docker exec {CONTAINER} grep -c _persistent_capable {PATCH_TARGET}")) == 3  # the definition and its two uses


def _node_memory(name):
    """A node's memory as its cgroup counts it: (limit, used by everything, used by the engine's rank) in bytes.

    Used = usage less inactive file pages (what the kernel would reclaim first)."""
    script = f"""
    node=$(awk -F: '$2 == "memory" {{print $3}}' /proc/1/cgroup)
    used() {{ u=$(cat "$1/memory.usage_in_bytes"); f=$(awk '$1 == "total_inactive_file" {{print $2}}' "$1/memory.stat"); echo $((u - f)); }}
    base=/sys/fs/cgroup/memory$node
    awk '$1 == "hierarchical_memory_limit" {{print $2}}' "$base/memory.stat"
    used "$base"
    rank=$(docker inspect -f '{{{{.Id}}}}' {CONTAINER} 2>/dev/null) && used "$base/$rank" || echo 0
    """
    out = subprocess.run(["docker", "exec", name, "sh", "-c", script], capture_output=True, text=True, check=True).stdout.split()
    return tuple(int(value) for value in out)


def test_every_node_is_a_memory_cgroup_that_the_engine_mostly_holds(host):
    """A Spark's shape: the node's memory is its cgroup's limit, the rank lives inside it and its KV is
    sized from gmu x that limit, so the serving engine holds most of the node (as 0.85 of a GB10)."""
    name = host.backend.get_hostname()
    limit, used, rank = _node_memory(name)
    assert limit < 8 * GIB, f"{name}: no memory limit ({limit})"
    non_kv = NON_KV_GIB["head" if RANKS[name] == 0 else "worker"]
    assert _flag(_container(host)["Args"], "--kv-cache-memory-bytes") == str(int(GMU * limit - non_kv * GIB))
    assert rank >= 0.65 * limit, f"{name}: the engine holds {rank / GIB:.2f} of {limit / GIB:.2f} GiB"
    assert used >= rank


def _env():
    # molecule forces colour on; the recap is parsed as text
    return dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")


def _run_playbook(playbook, *extra, inventory=INVENTORY, hosts=tuple(RANKS), on_line=None):
    """A playbook of the repository against inventory; asserts it passed on exactly `hosts`. (whitespace-folded
    stdout, changed per host.) on_line, if given, sees each line of stdout as the run prints it."""
    command = ["ansible-playbook", "-i", str(inventory), str(REPO / playbook), *extra]
    if on_line is None:
        result = subprocess.run(command, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=1500, check=False)
        returncode, stdout, stderr = result.returncode, result.stdout, result.stderr
    else:
        with subprocess.Popen(command, cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
            errors = []
            reader = threading.Thread(target=lambda: errors.append(process.stderr.read()))
            reader.start()
            lines = []
            for line in process.stdout:
                lines.append(line)
                on_line(line)
            reader.join()
            returncode, stdout, stderr = process.wait(timeout=60), "".join(lines), "".join(errors)
    assert returncode == 0, stdout[-4000:] + stderr[-2000:]
    recap = dict(re.findall(r"^(spark\d)\s+:\s+ok=\d+\s+changed=(\d+)", stdout, re.M))
    assert set(recap) == set(hosts), stdout[-2000:]
    # The YAML callback wraps long messages: phrases are matched on whitespace-folded text.
    return " ".join(stdout.split()), {host: int(changed) for host, changed in recap.items()}


def _start_times():
    times = {}
    for name in RANKS:
        out = subprocess.run(
            ["docker", "exec", name, "docker", "inspect", "-f", "{{.State.StartedAt}} {{.Args}}", CONTAINER],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        times[name] = out
    return times


@pytest.mark.parametrize("thinking", [False, True])
def test_head_streams_a_chat_completion(thinking):
    body = {
        "model": "glm-5.3-flash",
        "messages": [{"role": "user", "content": "Reply with exactly: PING-OK"}],
        "max_tokens": 16,
        "stream": True,
        "stream_options": {"include_usage": True},
        "chat_template_kwargs": {"enable_thinking": thinking},
    }
    chunks, usage = [], None
    with httpx.stream("POST", f"{HEAD_API}/v1/chat/completions", json=body, timeout=120) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[len("data: ") :])
            chunks.extend(choice["delta"] for choice in event["choices"])
            usage = event.get("usage") or usage
    assert usage
    assert usage["completion_tokens"] >= 1
    assert len(chunks) >= 2, chunks
    field = "reasoning" if thinking else "content"
    assert any(delta.get(field) for delta in chunks), f"no delta.{field} in {chunks}"


# The monitoring (docs/monitoring.md): Prometheus and Alertmanager on the head, listening on its loopback only, so
# read from the head itself. molecule's inventory scrapes at the role's pace (15 s) and calls an engine down for 5 s
# an alert.
DASHBOARD = REPO / "roles/monitoring/files/sparkfleet-dashboard.json"
ALERTS_KEPT = "/var/tmp/sparkfleet-alerts.jsonl"


def _prometheus(path, **params):
    """The data of one answer of Prometheus's HTTP API on the head."""
    url = f"http://127.0.0.1:9090{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
    answer = subprocess.run(["docker", "exec", "spark1", "curl", "-sf", url], capture_output=True, text=True, check=True, timeout=60).stdout
    return json.loads(answer)["data"]


def _scraped_targets():
    return {
        (target["labels"]["job"], target["labels"].get("node", target["labels"]["sparkfleet_engine"])): target["health"]
        for target in _prometheus("/api/v1/targets")["activeTargets"]
    }


def _scraped_twice_since(moment, timeout=90):
    """Wait until Prometheus has scraped every target twice since `moment` (seconds since the epoch, this machine's
    clock, which the nodes share): what a query reads then includes what came before `moment`, in a rate window too."""
    deadline, first = time.time() + timeout, {}
    while time.time() < deadline:
        last = {target["scrapeUrl"]: _utc_seconds(target["lastScrape"]) for target in _prometheus("/api/v1/targets")["activeTargets"]}
        first.update({url: at for url, at in last.items() if url not in first and at > moment})
        if set(first) >= set(last) and all(last[url] > first[url] for url in last):
            return
        time.sleep(2)  # each look is a `docker exec`: a few a scrape interval
    raise AssertionError(f"not every target scraped twice in {timeout} s since {moment}: {first}")


def test_prometheus_on_the_head_scrapes_every_node_and_the_engine_with_the_clusters_rules():
    wanted = {("sparkfleet-node", node): "up" for node in RANKS} | {("sparkfleet-engine", "sparks"): "up"}
    _wait_until(lambda: _scraped_targets() == wanted, 60, f"every target up: {wanted}")
    rules = {rule["name"]: rule for group in _prometheus("/api/v1/rules")["groups"] for rule in group["rules"]}
    assert {"SparkfleetEngineDown", "SparkfleetEngineNoProgress", "SparkfleetKVCacheNearFull", "SparkfleetNodeMemoryLow"} <= set(rules)
    assert "SparkfleetMTPAcceptanceLow" not in rules  # the cpu profile has no speculative decoding to watch
    assert all(rule["health"] == "ok" for rule in rules.values()), {name: rule.get("lastError") for name, rule in rules.items()}
    assert rules["SparkfleetEngineDown"]["state"] == "inactive"
    alertmanagers = _prometheus("/api/v1/alertmanagers")["activeAlertmanagers"]
    assert [manager["url"] for manager in alertmanagers] == ["http://127.0.0.1:9093/api/v2/alerts"]


ACCEPTANCE_PANEL = "MTP acceptance per draft position"


def _dashboard_answers(engine=".+"):
    """Each query of the shipped dashboard as Grafana sends it (engine as its $engine, a 1 m rate window) against the
    head's Prometheus: {(panel title, legend): [values]}."""
    answers = {}
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel["targets"]:
            expr = target["expr"].replace("$engine", engine).replace("$__rate_interval", "1m")
            answers[(panel["title"], target["legendFormat"])] = [float(item["value"][1]) for item in _prometheus("/api/v1/query", query=expr)["result"]]
    return answers


def test_every_dashboard_panel_query_returns_the_simulated_engines_series():
    """Each query of the shipped dashboard against the head's Prometheus right after a few requests: every panel answers
    numbers but the acceptance panel's, which reads speculative decoding (this engine drafts nothing: the cpu profile;
    the two-engines case's second engine runs vLLM's n-gram drafter and answers it, test_faults). The GPU panels read
    the nvidia-smi double through each node's GPU reader and node exporter: the recorded GB10 table's power,
    temperature and use, and the SM clock a locked GB10 reads (docs/monitoring.md)."""
    body = {"model": "glm-5.3-flash", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "stream": True}
    for _unused in range(3):
        stream_chat(HEAD_API, body, {}, timeout=120)
    _scraped_twice_since(time.time())
    answered = _dashboard_answers()
    assert len(answered) == 17, answered
    empty = {key: values for key, values in answered.items() if key[0] == ACCEPTANCE_PANEL}
    assert empty == {(ACCEPTANCE_PANEL, "{{sparkfleet_engine}} position {{position}}"): [], (ACCEPTANCE_PANEL, "{{sparkfleet_engine}} all positions"): []}
    for key, values in answered.items():
        assert key in empty or any(math.isfinite(value) for value in values), (key, values)  # a number, not NaN
    assert len(answered[("Memory available per node", "{{node}}")]) == len(RANKS)
    # The recorded GB10 table's 36 C, 3 W and 0 % from every node.
    titles = ("GPU SM clock per node", "GPU power per node", "GPU temperature per node", "GPU use per node")
    gpu = {title: answered[(title, "{{node}} GPU {{gpu}}")] for title in titles}
    # The SM clock: the inventory's lock (nvidia_driver_gpu_clock_limits_mhz [200, 2000]) holds every GB10 at 2000 MHz.
    expected = {"GPU SM clock per node": [2e9] * 4, "GPU power per node": [3.0] * 4, "GPU temperature per node": [36.0] * 4, "GPU use per node": [0.0] * 4}
    assert gpu == expected, gpu
    # status.yml reads the same Prometheus: the engine's last minutes, beside what status reads itself.
    output, changed = _run_playbook("playbooks/status.yml")
    assert "last 5m (Prometheus on spark1):" in output, output[-3000:]
    live = re.search(r"engine sparks: up; ([0-9.]+) tokens/s generated, TTFT p95 ([0-9.]+) s, inter-token p95 ([0-9.]+) s", output)
    assert live, output[-3000:]
    assert float(live.group(1)) > 0
    assert "alerts firing:" in output
    assert set(changed.values()) == {0}


def test_grafana_is_provisioned_with_the_clusters_prometheus_and_the_dashboard():
    """monitoring_grafana_node is the head in molecule's inventory: Grafana's provisioning files there name a data
    source that node reaches (Prometheus answers a query at its URL, from that node) and the dashboard as shipped. No
    Grafana server can be installed here (docs/monitoring.md): what Grafana makes of the files is not run."""

    def read(path):
        return subprocess.run(["docker", "exec", "spark1", "cat", path], capture_output=True, text=True, check=True).stdout

    (source,) = yaml.safe_load(read("/etc/grafana/provisioning/datasources/sparkfleet.yml"))["datasources"]
    assert (source["type"], source["uid"], source["url"]) == ("prometheus", "sparkfleet-prometheus", "http://127.0.0.1:9090")
    answer = subprocess.run(["docker", "exec", "spark1", "curl", "-sf", f"{source['url']}/api/v1/query?query=up"], capture_output=True, text=True, check=True)
    assert json.loads(answer.stdout)["status"] == "success"
    (provider,) = yaml.safe_load(read("/etc/grafana/provisioning/dashboards/sparkfleet.yml"))["providers"]
    assert provider["type"] == "file"
    assert json.loads(read(provider["options"]["path"] + "/sparkfleet-dashboard.json")) == json.loads(DASHBOARD.read_text())


# The front door (docs/front-door.md): HAProxy on the head. molecule's inventory keeps its queue at 2.
FRONT_DOOR = "http://192.168.100.11:8080"
FRONT_DOOR_QUEUE, RETRY_AFTER = 2, "7"
# About 10 s each on the cpu engine (~18 tokens/s alone): streams a drain waits for / that hold the slots a while.
DRAINED_STREAM_TOKENS, ADMISSION_STREAM_TOKENS = 200, 200


def _front_door_stream(tokens, result, headers=None, timeout=600):
    """One chat completion streamed through the front door, exactly `tokens` tokens long (ignore_eos); fills
    result with its status, the chunks seen, the finish reason, and the client's error if the stream broke."""
    body = {
        "model": "glm-5.3-flash",
        "messages": [{"role": "user", "content": "Count to a thousand."}],
        "max_tokens": tokens,
        "ignore_eos": True,
        "stream": True,
    }
    stream_chat(FRONT_DOOR, body, result, headers=headers, timeout=timeout)


def _front_door_runtime(command):
    """What HAProxy's runtime API on the head answers to command."""
    script = (
        f"import socket; s = socket.socket(socket.AF_UNIX); s.connect('/run/haproxy/sparkfleet.sock'); s.sendall(b'{command}\\n'); print(s.makefile().read())"
    )
    return subprocess.run(["docker", "exec", "spark1", "python3", "-c", script], capture_output=True, text=True, check=True).stdout


def _front_door_servers():
    """HAProxy's `show stat` on the head: {engine or BACKEND: {status, scur, qcur, smax, ...}} (the queue is the backend's)."""
    text = _front_door_runtime("show stat")
    header, *rows = [line.lstrip("# ").split(",") for line in text.splitlines() if line.strip()]
    table = [dict(zip(header, row, strict=False)) for row in rows]
    return {row["svname"]: row for row in table if row["pxname"] == "engines"}


def _image_cache(name):
    """Where the node keeps its rank's compile and JIT caches (the rank's /cache/image), and when its image was last
    launched (docs/warm-boots.md)."""
    where = '{{range .Mounts}}{{if eq .Destination "/cache/image"}}{{.Source}}{{end}}{{end}}'
    directory = subprocess.run(["docker", "exec", name, "docker", "inspect", "-f", where, CONTAINER], capture_output=True, text=True, check=True).stdout.strip()
    launched = subprocess.run(["docker", "exec", name, "stat", "-c", "%Y", f"{directory}/last-launch"], capture_output=True, text=True, check=True).stdout
    return directory, int(launched)


def _utc_seconds(stamp):
    """An RFC 3339 time as Alertmanager writes it (nanoseconds, Z) -> seconds since the epoch."""
    whole, _unused, fraction = stamp.rstrip("Z").partition(".")
    return datetime.datetime.fromisoformat(whole).replace(tzinfo=datetime.timezone.utc).timestamp() + float(f"0.{fraction or 0}")


def _wait_until(predicate, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.25)
    raise AssertionError(f"not reached in {timeout} s: {what}")


CLUSTER_ENV = REPO / "molecule/resources/inventory-cluster-env/cluster.env"


@pytest.fixture(scope="module")
def installed_collection(tmp_path_factory):
    """The collection as a user gets it: the tarball `ansible-galaxy collection build` makes, installed into an
    empty collections path. (collections path, the tarball's members.)"""
    directory = tmp_path_factory.mktemp("collection")
    subprocess.run(["ansible-galaxy", "collection", "build", "--output-path", str(directory), str(REPO)], cwd=directory, check=True, capture_output=True)
    (tarball,) = directory.glob("sparkfleet-vllm-*.tar.gz")
    collections = directory / "collections"
    subprocess.run(
        ["ansible-galaxy", "collection", "install", "--no-deps", "-p", str(collections), str(tarball)],
        cwd=directory, env={k: v for k, v in os.environ.items() if k != "ANSIBLE_CONFIG"}, check=True, capture_output=True,
    )  # fmt: skip
    with tarfile.open(tarball) as archive:
        members = archive.getmembers()
    return collections, members


def _run_installed(collections, playbook, inventory, *extra):
    """A collection playbook run from an empty directory holding only a copy of the inventory: no ansible.cfg,
    the installed tarball on the collections path. The cluster_env inventory plugin is enabled as any
    collection's inventory plugin must be, and SSH pipelining on (here by environment, as a user's ansible.cfg
    would)."""
    workdir = collections.parent / f"run-{time.time_ns()}"
    shutil.copytree(inventory.parent if inventory.is_file() else inventory, workdir / "inventory", symlinks=False)
    env = {k: v for k, v in _env().items() if k != "ANSIBLE_CONFIG"}
    # SSH pipelining as the repository's ansible.cfg sets it (and as the README asks of a user's): without it,
    # become runs modules through a pty, and one CI run lost a module's output there ("\r\n" for JSON).
    env.update(ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_INVENTORY_ENABLED="sparkfleet.vllm.cluster_env,ansible.builtin.yaml")
    env.update(ANSIBLE_PIPELINING="True")
    result = subprocess.run(
        ["ansible-playbook", "-i", str(workdir / "inventory" / inventory.name if inventory.is_file() else workdir / "inventory"), playbook, *extra],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=1500, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    recap = dict(re.findall(r"^(spark\d)\s+:\s+ok=\d+\s+changed=(\d+)", result.stdout, re.M))
    return " ".join(result.stdout.split()), {host: int(changed) for host, changed in recap.items()}


RUN_LOCK = "/var/lib/sparkfleet/run.lock"


def _run_lock():
    """The run lock's record on the head, or None when no run holds it."""
    result = subprocess.run(["docker", "exec", "spark1", "cat", RUN_LOCK], capture_output=True, text=True, check=False)
    return json.loads(result.stdout) if result.returncode == 0 else None


def _wait_for_the_run_lock(running, timeout=300):
    """The record a running run (running() true while it runs) takes, as soon as it is there."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and running():
        record = _run_lock()
        if record:
            return record
        time.sleep(0.25)
    raise AssertionError("the run never took the run lock")


@pytest.fixture(scope="module")
def site_rerun(installed_collection):
    """site.yml once more with nothing changed, as a user with the built collection runs it: the installed
    tarball's sparkfleet.vllm.site, from an empty directory holding a copy of the recipe's cluster.env (the
    cluster_env inventory plugin) rather than hosts.yml. One run proves that a re-run restarts nothing, that
    cluster.env describes the same engine (any difference would relaunch it) and that the collection works
    installed, its data and all. (folded stdout, changed per host, ranks' start times before and after, when
    it started.) It is the scenario's idempotence proof (molecule.yml has no idempotence step)."""
    before, started = _start_times(), time.time()
    # The cpu image's build context with the vLLM wheels `make` fetched: the tarball does not ship ~200 MB of
    # wheels (galaxy.yml's build_ignore), so a user of the installed collection points at such a context.
    context = ("-e", f"engine_image_build_context={REPO / 'images/engine-cpu'}")
    # While it runs, a second operator's lane switch (test_a_second_run_..._is_refused_at_once_naming_it).
    assert _run_lock() is None, "a run left its lock (converge releases its own)"
    first = {}
    thread = threading.Thread(
        target=lambda: first.update(result=_run_installed(installed_collection[0], "sparkfleet.vllm.site", CLUSTER_ENV, "-e", "lane=500k", *context))
    )
    thread.start()
    try:
        holder = _wait_for_the_run_lock(thread.is_alive)
        second = subprocess.run(
            ["ansible-playbook", "-i", str(INVENTORY), str(REPO / "playbooks/lane.yml"), "-e", "lane=1m"],
            cwd=REPO, env=_env(), capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        # The watch's timer fires meanwhile: a run holds the cluster.
        watch = subprocess.run(
            ["ansible-playbook", "-i", str(INVENTORY), str(REPO / "playbooks/watch.yml")],
            cwd=REPO, env=_env(), capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        first_still_running = thread.is_alive()
    finally:
        thread.join()
    out, changed = first["result"]
    return out, changed, before, _start_times(), started, (holder, second, _run_lock(), watch, first_still_running)


def test_the_built_collection_holds_no_link_and_renders_from_an_empty_directory(installed_collection):
    collections, members = installed_collection
    assert members
    assert not [member.name for member in members if member.issym() or member.islnk()]
    assert not [str(path) for path in collections.rglob("*") if path.is_symlink()]
    out, _unused = _run_installed(collections, "sparkfleet.vllm.render", INVENTORY, "-e", "lane=1m")
    assert out.count('"--max-model-len", "1000000"') == len(RANKS), out[-3000:]  # the data shipped in the collection, lane 1m


def test_rerun_restarts_nothing(site_rerun):
    _unused, _unused, before, after, _unused, _unused = site_rerun
    assert after == before


def test_a_second_run_while_one_changes_the_cluster_is_refused_at_once_naming_it(site_rerun):
    """Two operators: lane.yml -e lane=1m while site.yml runs. The second is refused at its lock, before it reads a
    node, naming the first (playbook, user, controller, ansible-playbook pid, since); the first runs on untouched
    (test_rerun_restarts_nothing) and releases the lock at its end."""
    holder, second, after, _unused, _unused = site_rerun[5]
    assert holder["playbooks"] == ["site.yml"]  # the installed collection's sparkfleet.vllm.site
    assert second.returncode != 0
    first_error = next(line for line in (second.stdout + second.stderr).splitlines() if line.startswith(("[ERROR]", "fatal:")))
    assert first_error.startswith("[ERROR]: Task failed: Action failed: spark1's cluster is being changed by another run: site.yml run by"), first_error
    assert f"(ansible-playbook pid {holder['pid']}) since {holder['since']}. Nothing was changed by this run. Wait for it to end" in first_error
    # Not one node read: of preflight, only its checks of variables only (its inputs entry point) ran, before the lock.
    inputs = {task["name"] for task in yaml.safe_load((REPO / "roles/preflight/tasks/inputs.yml").read_text())}
    ran = set(re.findall(r"^TASK \[sparkfleet\.vllm\.preflight : (.+?)\] \*", second.stdout, re.M))
    assert ran, second.stdout[-3000:]
    assert {name for name in ran if not name.startswith("Validating arguments against arg spec 'inputs'")} <= inputs, ran
    assert after is None


def test_the_watch_neither_counts_nor_relaunches_while_a_run_holds_the_cluster(site_rerun):
    """A lane switch stops every rank on purpose: while a run holds the lock, the watch's timer firing says so and
    counts no failed probe (three of them would relaunch the engine under that run)."""
    holder, _unused, _unused, watch, first_still_running = site_rerun[5]
    assert first_still_running, "site.yml ended before the watch ran: nothing was proven"
    assert watch.returncode == 0, watch.stdout[-3000:]
    folded = " ".join(watch.stdout.split())
    assert f"watch: a run is changing the cluster (site.yml run by {holder['user']} on {holder['controller']}" in folded, folded[-3000:]
    assert "not probing, not relaunching" in folded
    assert "watch: healthy" not in folded
    assert "watch: failing" not in folded


def test_the_same_cluster_from_its_cluster_env_changes_nothing(site_rerun):
    assert site_rerun[1] == {name: 0 for name in RANKS}


def test_rerun_on_full_nodes_counts_the_engines_memory_and_leaves_its_gpus_alone(site_rerun):
    """With the engine holding most of every node, preflight counts that memory as the engine's own
    (a relaunch frees it first) and says so, and runs nothing that needs an idle GPU."""
    out = site_rerun[0]
    # One report per node (fits, or fits once the engine role drops the page cache), each with what the rank holds.
    held = [float(gib) for gib in re.findall(r"(\S+) GiB of it held by this engine", out)]  # the YAML callback doubles the ' of engine's
    assert len(held) >= len(RANKS), out[:6000]
    limit = _node_memory("spark1")[0]
    assert all(gib * GIB >= 0.65 * limit for gib in held), held
    assert "does_not_fit" not in out
    assert "the clock burn and the all-reduce, which need idle GPUs, were not run against it" in out
    assert "All-reduce across the engine's nodes, one rank per node" not in out


def test_a_rerun_that_relaunched_nothing_does_not_benchmark_again(site_rerun):
    out = site_rerun[0]
    assert "smoke benchmark: not run, this run did not relaunch engine sparks (nothing changed)." in out, out[-3000:]
    assert "Stream the scenarios at each concurrency" not in out


def _assert_site_ended_with_the_bench_table_and_wrote_reports(out, started, lane, ranks):
    """site.yml after a launch: the benchmark's table last, and its JSONL, Markdown and PNG under reports/."""
    tail = out[out.rindex("Show the benchmark") :]
    assert "scenario conc ok ttft_s ttft_content_s e2e_s decode_tps content_tps" in tail
    for scenario in ("small", "reasoning"):
        assert re.search(rf"{scenario} [1-3] ([1-3])/\1 \d+\.\d+", tail), tail[:3000]
    assert "skipped" not in tail.split("PLAY RECAP")[0]  # small and reasoning both ran
    reports = REPO / "reports"
    newest = {ext: max(reports.glob(f"bench-sparks-{lane}-*.{ext}"), key=lambda p: p.stat().st_mtime) for ext in ("jsonl", "md", "png")}
    assert all(path.stat().st_mtime >= started for path in newest.values())
    assert len({path.stem for path in newest.values()}) == 1
    markdown = newest["md"].read_text()
    assert "## small" in markdown
    assert "## reasoning" in markdown
    assert "| conc | ok | TTFT any (s) | TTFT content (s) |" in markdown
    # Measured where users reach the engine: through the front door, every request sent to this engine.
    assert f"- url: {FRONT_DOOR} (the front door, every request sent to engine sparks)" in markdown, markdown[:1500]
    # Provenance: the server's vLLM and the ranks' attestation at launch head the report.
    assert re.search(r"^- vLLM: \d+\.\d+\S* \(the server's /version\)$", markdown, re.M), markdown[:1500]
    # (The cpu profile's gmu_check reads no GPU, so no driver; the head's image may carry a registry digest.)
    attested = rf"^- engine: rank attestation at \S+ \(lane {lane}\): {ranks} ranks, image sha256:.*, driver \S+, "
    assert re.search(attested + r"repo digest .+: every rank the same$", markdown, re.M), markdown[:1500]
    # Each patched file's bytes (the one the head's rank reads over vLLM's) and the NCCL the ranks loaded: the
    # cpu image's torch has none, and the nccl role's probe of that image on the head says so.
    mounted = subprocess.run(
        ["docker", "exec", "spark1", "docker", "exec", CONTAINER, "sha256sum", PATCH_TARGET], capture_output=True, text=True, check=True
    ).stdout.split()[0]
    assert re.search(rf"^- patched files: 1: sha256 {mounted[:12]}$", markdown, re.M), markdown[:2000]
    assert re.search(r"^- NCCL: the image's: torch's NCCL none \(no CUDA torch\), no library file$", markdown, re.M), markdown[:2000]
    # vLLM's own token counters agree with what the client counted, per scenario (nothing else ran meanwhile).
    agree = re.findall(r"^Token counts: client (\d+) completion / (\d+) prompt tokens, vLLM's /metrics (\d+) / (\d+): they agree\.$", markdown, re.M)
    assert len(agree) == 2, markdown
    assert all(int(a) == int(c) > 0 and int(b) == int(d) > 0 for a, b, c, d in agree), agree
    requests = [json.loads(line) for line in newest["jsonl"].read_text().splitlines()]
    assert {r["scenario"] for r in requests} == {"small", "reasoning"}
    # Every node's GPU sampled while the scenarios streamed (the nvidia-smi double answers the recorded GB10 table's
    # power and temperature, and the locked clock), kept beside the report and summed up in its header.
    sampled = json.loads(newest["md"].with_suffix(".gpu.json").read_text())["nodes"]
    assert len(sampled) == ranks, sampled
    for figures in sampled.values():
        assert figures["samples"] >= 2, figures
        assert (figures["power_w"]["max"], figures["temperature_c"]["max"], figures["sm_clock_mhz"]["max"]) == (3.0, 36.0, 2000.0), figures
    assert re.search(r"^- GPU during the benchmark: spark1: \d+ samples, SM clock 2000 MHz, power 3 W, temperature 36 C; ", markdown, re.M), markdown[:2500]
    # Concurrency 1..3 per scenario, warm-ups not counted. A wave whose streams came whole in one read ran once
    # more: its second try's requests are logged too (try 2), and the report names each such wave.
    twice = {(r["scenario"], r["concurrency"]) for r in requests if r["try"] == 2}
    assert len([r for r in requests if r["try"] == 1]) == 2 * (1 + 2 + 3)
    assert len(requests) == 2 * (1 + 2 + 3) + sum(concurrency for _unused, concurrency in twice)
    assert markdown.count(": second try: on the first, ") == len(twice), markdown
    assert all(r["ok"] and r["ttft_s"] > 0 and "ttft_content_s" in r for r in requests)
    # Thinking on: content never comes before the first token, and where the model reasoned first the
    # two moments are reported apart (a chunk may carry </think> and content together: then equal).
    thinking = [r for r in requests if r["scenario"] == "reasoning"]
    assert all(r["ttft_content_s"] is None or r["ttft_content_s"] >= r["ttft_s"] for r in thinking)
    assert any(r["reasoning_tokens"] and (r["ttft_content_s"] is None or r["ttft_content_s"] > r["ttft_s"]) for r in thinking)
    assert newest["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_kv_prediction_is_within_two_percent_of_the_engines_print(site_rerun):
    out = site_rerun[0]
    # The engine role's line (preflight predicts too, before launch, without an engine print to compare).
    found = re.search(r"KV: predicted ([\d,]+) KV tokens per rank (?:(?!KV: predicted).)*? the engine printed ([\d,]+) \(([\d.]+) of it predicted\)", out)
    assert found, out[-3000:]
    predicted, printed = (int(group.replace(",", "")) for group in found.groups()[:2])
    assert abs(predicted / printed - 1) <= 0.02
    assert "lane 5 x 500,000 = 2,500,000 tokens" in out


def test_bench_playbook_holds_the_engine_to_its_first_answer_and_fails_naming_what_it_missed(tmp_path):
    """The cpu profile's seeded random weights answer the greedy question with the same tokens every time: the first
    answer of this engine is recorded, and a record the engine does not repeat fails the run, never recorded over."""
    small = ("-e", '{"smoke_bench_scenarios": ["small"], "smoke_bench_concurrency": 1}', "-e", f"smoke_bench_answer_dir={tmp_path}")
    out, _unused = _run_playbook("playbooks/bench.yml", *small)
    assert "exact answer: recorded for this engine (key " in out, out[-3000:]
    (record,) = tmp_path.glob("*.json")
    kept = json.loads(record.read_text())
    assert kept["answer"].strip()  # 16 greedy tokens (ignore_eos)
    assert record.name == kept["key"] + ".json"
    stem = re.search(r"reports: (\S+)\.\{jsonl,md,png,json\}", out).group(1)
    report = pathlib.Path(stem + ".md").read_text()
    assert f"- exact answer: recorded for this engine (key {kept['key'][:12]})" in report
    # The previous run of this engine and lane at this site (converge's site.yml, or an earlier bench) is the
    # baseline: its small wave at concurrency 1 is compared figure by figure, report-only by default.
    assert "## Against the previous run at this site" in report
    assert re.search(r"^Baseline: bench-sparks-500k-\d{8}T\d{6}Z\.json\.$", report, re.M), report[-2500:]
    assert re.search(r"^\| small \| 1 \| TTFT content \(s\) \| \d+\.\d{3} \| \d+\.\d{3} \| \d+\.\d\d \| \+100% \| (ok|REGRESSED) \|$", report, re.M)
    assert "against the previous run (bench-sparks-500k-" in out
    summary = json.loads(pathlib.Path(stem + ".json").read_text())
    assert summary["identity"]["engine"] == "sparks"
    assert summary["identity"]["profile"] == "cpu"
    assert summary["identity"]["image_id"].startswith("sha256:")
    (wave,) = summary["waves"]
    assert wave["scenario"] == "small"
    assert wave["concurrency"] == 1
    assert wave["ttft_content_s"] > 0
    # A relaunch repeating it token for token: test_faults' heal at -vvv (the same two-node engine launched again).

    record.write_text(json.dumps({**kept, "answer": "PING-OK"}))
    # A baseline no engine here can match (the same summary, its TTFT 1 ms), gated: a regression fails the run too.
    doctored = tmp_path / "baseline.json"
    summary["waves"][0]["ttft_content_s"] = 0.001
    doctored.write_text(json.dumps(summary))
    result = subprocess.run(
        ["ansible-playbook", "-i", str(INVENTORY), str(REPO / "playbooks/bench.yml"), *small,
         "-e", '{"smoke_bench_thresholds": {"small": {"ttft_s_max": 0.0001}}}',
         "-e", f"smoke_bench_baseline_file={doctored}", "-e", "smoke_bench_baseline_gate=true"],
        cwd=REPO, env=_env(), capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    out = " ".join(result.stdout.split())
    assert result.returncode != 0
    assert "smoke benchmark check(s) missed: small at concurrency 1: ttft_s" in out, out[-3000:]
    assert "is above the threshold 0.0001 (ttft_s_max)" in out
    assert re.search(r"small at concurrency 1: TTFT content \d+\.\d{3} s is \d+\.\d\dx the previous run's 0\.001 \(tolerance \+100%\)", out), out[-3000:]
    assert "regressions against the previous run count because smoke_bench_baseline_gate is true" in out
    assert f"exact answer: differs from the one recorded at {kept['recorded_at']} for this engine (key {kept['key'][:12]}): recorded 'PING-OK', now " in out
    assert json.loads(record.read_text())["answer"] == "PING-OK"  # a mismatch is never recorded over


# gmu 0.99 failing in preflight before any change: the bad-input matrix of test_faults.py.


def _node_state():
    """Everything the roles may change on every node (test_host_stack's snapshot) and every rank's start."""
    from test_host_stack import _snapshot

    return _snapshot(), _start_times()


def test_dry_runs_change_nothing_and_say_what_would_restart_and_why():
    """Two dry runs side by side on the serving 500k engine (each only reads, each with its own run lock): site.yml
    -e lane=1m --check --diff runs every role in check mode and names every rank as one that would restart, with
    the flags that differ; lane.yml -e lane=500k --check says nothing would restart. No node changed."""
    from test_host_stack import _own_lock

    before = _node_state()
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        switch = pool.submit(_run_playbook, "site.yml", "-e", "lane=1m", "--check", "--diff", *_own_lock("dry-run-switch"))
        same = pool.submit(_run_playbook, "playbooks/lane.yml", "-e", "lane=500k", "--check", *_own_lock("dry-run-same"))
        (output, _unused), (same_output, same_changed) = switch.result(), same.result()
    assert _node_state() == before
    for name, rank in RANKS.items():
        assert f"dry run: {name} (rank {rank}) would restart: what it runs differs from this run." in output, output[-4000:]
    assert output.count("---max-model-len 500000") == len(RANKS)
    assert output.count("+--max-model-len 1000000") == len(RANKS)
    assert "Start the workers (headless) first" not in output
    assert "dry run: engine sparks would not restart: every rank runs what this run renders and the head answers." in same_output, same_output[-3000:]
    assert "would restart:" not in same_output
    assert set(same_changed.values()) == {0}
    test_head_streams_a_chat_completion(False)  # the 500k engine serves on


# The run killed here (test_a_killed_runs_lock_stays_behind) and taken over by the lane switch after it.
KILLED_RUN = {}


def _kill_the_whole_run(pid):
    """SIGKILL an ansible-playbook and every process under it, as a crashed controller ends them all.

    Its process group is not all of it: each of Ansible's task workers starts a session of its own
    (WorkerProcess._detach), and one left alive keeps running its task with no playbook to answer to.
    The playbook is stopped first, so that it forks no worker while its workers are found."""
    os.killpg(pid, signal.SIGSTOP)
    parents = {}
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # a process that ended while it was read
    tree, found = {pid}, True
    while found:
        below = {child for child, parent in parents.items() if parent in tree} - tree
        tree |= below
        found = bool(below)
    for member in tree:
        try:
            if os.getpgid(member) == member:  # a worker's session: its ssh clients with it
                os.killpg(member, signal.SIGKILL)
            else:
                os.kill(member, signal.SIGKILL)
        except ProcessLookupError:
            continue


def test_a_killed_runs_lock_stays_behind():
    """A lane switch killed (SIGKILL, as a lost terminal or a crashed controller ends it) just after it took the lock,
    while it reads the nodes: its record stays, naming its own ansible-playbook process."""
    run = subprocess.Popen(
        ["ansible-playbook", "-i", str(INVENTORY), str(REPO / "playbooks/lane.yml"), "-e", "lane=1m"],
        cwd=REPO, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        holder = _wait_for_the_run_lock(lambda: run.poll() is None)
    finally:
        _kill_the_whole_run(run.pid)
        run.wait()
    assert (holder["pid"], holder["playbooks"]) == (run.pid, ["lane.yml"])
    assert _run_lock() == holder
    KILLED_RUN.update(holder)
    # status.yml in between: who held it, and that the next run finishes what it left.
    output, _unused = _run_playbook("playbooks/status.yml")
    assert (
        f"run lock on spark1: lane.yml run by {holder['user']} on {holder['controller']} (ansible-playbook pid {holder['pid']})"
        f" since {holder['since']}; it ended without releasing it (failed, killed or lost), so what it changed may be half done:"
        " the next site.yml or lane.yml takes the lock over and finishes it"
    ) in output, output[-3000:]


def test_lane_switch_on_full_nodes_restarts_every_rank_and_only_the_ranks_move_memory():
    """500k -> 1m while the engine holds most of every node: the relaunch fits because the old ranks'
    memory is the engine's own; the idle-GPU checks run after they stop; memory outside the ranks stays put."""
    before, memory_before, started = _start_times(), {name: _node_memory(name) for name in RANKS}, time.time()
    caches_before = {name: _image_cache(name) for name in RANKS}
    # Users stream through the front door from the moment the run has decided to relaunch (it then asks the running
    # engine for a token; the drain comes a few tasks later): two clients, each starting its next stream when one
    # ends, so that one is always in flight; another client asks for one token every half second. (Earlier, their
    # load would only slow the run's reads on two cores.)
    streams, switch, refused, stop, deciding = [], {}, [], threading.Event(), threading.Event()

    def keep_streaming():
        while not stop.is_set():
            result = {}
            _front_door_stream(DRAINED_STREAM_TOKENS, result)
            streams.append(result)
            if result.get("status") != 200:
                return

    def note_the_decision(line):
        if "TASK [sparkfleet.vllm.engine : Ask the engine for one token]" in line:
            deciding.set()

    switching = threading.Thread(target=lambda: switch.update(result=_run_playbook("playbooks/lane.yml", "-e", "lane=1m", on_line=note_the_decision)))
    switching.start()
    assert deciding.wait(timeout=600), "lane.yml never asked the running engine for a token"
    clients = [threading.Thread(target=keep_streaming) for _unused in range(2)]
    for client in clients:
        client.start()
        time.sleep(1)
    while switching.is_alive() and not refused:
        answer = httpx.post(
            f"{FRONT_DOOR}/v1/chat/completions", json={"model": "glm-5.3-flash", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}, timeout=120
        )
        if answer.status_code != 200:
            refused.append(answer)
        time.sleep(0.5)
    stop.set()
    switching.join()
    for client in clients:
        client.join()
    output, changed = switch["result"]
    after, memory_after = _start_times(), {name: _node_memory(name) for name in RANKS}
    # Drained: the streams in flight ran to their end before the ranks stopped, and a request during the drain got
    # 503 at once; no stream that began was cut or ended without its finish reason.
    drained = re.search(r"waited for (\d+) request\(s\) in flight, cut 0 at the 120 s drain timeout", output)
    assert drained, output[-5000:]
    assert int(drained.group(1)) >= 1
    assert output.index("Drain the engine out of the front door before its ranks stop") < output.index("Stop this node's rank (kept")
    served = [result for result in streams if result.get("status") == 200]
    assert served, streams
    assert [(result["finish"], result["error"]) for result in served] == [("length", None)] * len(served), served
    assert refused, "no request was refused during the drain"
    assert (refused[0].status_code, refused[0].headers.get("retry-after")) == (503, RETRY_AFTER), refused[0].text
    assert "No engine takes requests now (drained for a planned stop, or down)" in refused[0].json()["error"]["message"]
    for name in RANKS:
        assert after[name] != before[name], f"{name} was not restarted"
        assert f"--max-model-len {LANES['1m'][0]}" in after[name]
        assert f"--max-num-seqs {LANES['1m'][1]}" in after[name]
        limit, _unused, rank = memory_after[name]
        assert rank >= 0.65 * limit, f"{name}: the new engine holds {rank / GIB:.2f} of {limit / GIB:.2f} GiB"
        # The switch drops each node's page cache before the new ranks start, so what is outside them may shrink
        # (the head's by 0.25 GiB in one run); it must not grow: no old rank or other process kept memory.
        others_before, others_after = (memory[name][1] - memory[name][2] for memory in (memory_before, memory_after))
        assert others_after - others_before < GIB / 4, f"{name}: memory outside the rank grew by {(others_after - others_before) / GIB:.2f} GiB"
    # Each rank's compile and JIT caches stay on its node, in its image's directory, marked as launched again.
    for name in RANKS:
        (directory, launched), (directory_after, launched_after) = caches_before[name], _image_cache(name)
        assert re.fullmatch(r"/var/tmp/sparkfleet/cache/images/[0-9a-f]{12}", directory), directory
        assert directory_after == directory
        assert launched_after > launched
    # Only the engine changes: each worker stops its own rank, marks its image's caches as launched and drops its
    # page cache (3 changes), the head also starts every rank; nothing else on any node.
    assert changed["spark1"] > 3
    assert all(changed[name] == 3 for name in RANKS if name != "spark1"), changed
    assert "lane 1m (1000000 x 3)" in output
    # The killed run's lock, taken over and said so; released at the end.
    assert KILLED_RUN, "test_a_killed_runs_lock_stays_behind runs first"
    assert (
        "took over the lock of a run that ended without releasing it (failed, killed or lost): lane.yml run by"
        f" {KILLED_RUN['user']} on {KILLED_RUN['controller']} (ansible-playbook pid {KILLED_RUN['pid']}) since {KILLED_RUN['since']}"
    ) in output, output[:5000]
    assert _run_lock() is None
    # The switch keeps every rank's image, fabric variables and shape: the running engine streamed a token over
    # that fabric before its ranks stopped, so the all-reduce was not run again (the clock burn would be, on GPUs).
    asked = output.index("Ask the engine for one token", output.index("Note whether this run relaunches the engine"))
    stopped = output.index("Stop this node's rank (kept for a roll back when the engine served, else removed)")
    assert asked < stopped < output.index("All-reduce not run: the running engine, on the same image") < output.index("Start the workers (headless) first")
    assert "All-reduce across the engine's nodes, one rank per node" not in output
    # The old ranks were kept, stopped, for a roll back (the new engine booted: nothing rolled back).
    for name in RANKS:
        kept = subprocess.run(
            ["docker", "exec", name, "docker", "inspect", "-f", "{{.State.Status}} {{index .Config.Labels \"io.sparkfleet.lane\"}}", f"{CONTAINER}-previous"],
            capture_output=True, text=True, check=True,
        ).stdout.split()  # fmt: skip
        assert kept == ["exited", "500k"], (name, kept)
    # The readiness timeline of the relaunch: printed, and written under reports/ with every phase of the head.
    assert "readiness of engine sparks, lane 1m" in output
    first_token = re.search(r"first streamed token at ([0-9.]+) s", output)
    assert first_token, output[-3000:]
    (written,) = [path for path in (REPO / "reports").glob("readiness-sparks-*.json") if path.stat().st_mtime >= started]
    timeline = json.loads(written.read_text())
    head = timeline["ranks"][0]
    phases = ["container_started", "process_up", "weights_loaded", "kv_cache_allocated", "graphs_compiled", "api_up"]
    assert [head[phase] is not None for phase in phases] == [True] * len(phases), head
    assert [head[phase] for phase in phases] == sorted(head[phase] for phase in phases)
    assert head["api_up"] <= timeline["health"] <= timeline["first_token"] == float(first_token.group(1))
    assert [row["node"] for row in timeline["ranks"]] == list(RANKS)
    # What every rank attested before the launch, in the same record.
    assert timeline["attestation"]["lane"] == "1m"
    assert list(timeline["attestation"]["ranks"]) == list(RANKS)
    head_image = subprocess.run(
        ["docker", "exec", "spark1", "docker", "inspect", "-f", "{{.Image}}", CONTAINER], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert {rank["image_id"] for rank in timeline["attestation"]["ranks"].values()} == {head_image}


def _three_in_flight_and_the_queue_full():
    rows = _front_door_servers()
    return (int(rows["sparks"]["scur"]), int(rows["BACKEND"]["qcur"])) == (int(LANES["1m"][1]), FRONT_DOOR_QUEUE)


def test_the_front_door_admits_the_lanes_slots_queues_past_them_and_refuses_past_the_queue():
    """Lane 1m has 3 sequence slots: 3 + 2 streams at once, 3 run and 2 wait in the front door's queue; one more
    request gets 429 with Retry-After at once; the queued ones are served as slots free up. The engine never
    held more than its slots."""
    streams = [{} for _unused in range(int(LANES["1m"][1]) + FRONT_DOOR_QUEUE)]
    threads = [threading.Thread(target=_front_door_stream, args=(ADMISSION_STREAM_TOKENS, result)) for result in streams]
    for thread in threads:
        thread.start()
    try:
        _wait_until(
            _three_in_flight_and_the_queue_full,
            120,
            "3 streams in flight and 2 in the queue",
        )
        extra = httpx.post(
            f"{FRONT_DOOR}/v1/chat/completions", json={"model": "glm-5.3-flash", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}, timeout=30
        )
    finally:
        for thread in threads:
            thread.join()
    assert extra.status_code == 429, (extra.status_code, extra.text)
    assert extra.headers["retry-after"] == RETRY_AFTER
    assert "Every sequence slot of the engines is taken and 2 requests already wait" in extra.json()["error"]["message"]
    assert [(result["status"], result["finish"], result["error"]) for result in streams] == [(200, "length", None)] * len(streams)
    assert int(_front_door_servers()["sparks"]["smax"]) == int(LANES["1m"][1])


def test_a_foreign_process_holding_a_workers_memory_refuses_a_relaunch_before_any_rank_stops():
    """Memory that is not the engine's is not available: the switch back is refused on the worker that
    lacks it, naming the process, before any rank stops; the engine keeps serving. Without it, the
    switch back to 500k passes every check (its dry run: the memory check only reads)."""
    limit, used, _unused = _node_memory("spark3")
    hog_bytes = int(limit - used + GIB / 4)  # more than the node has free: the kernel reclaims cache, then swaps
    hog = subprocess.Popen(
        ["docker", "exec", "spark3", "python3", "-c",
         f"import sys, time; b = bytearray({hog_bytes}); b[::4096] = b'x' * len(b[::4096]); print('held', flush=True); time.sleep(900)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert hog.stdout.readline().strip() == "held"
        before = _start_times()
        result = subprocess.run(
            ["ansible-playbook", "-i", str(INVENTORY), str(REPO / "playbooks/lane.yml"), "-e", "lane=500k"],
            cwd=REPO, env=_env(), capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        out = " ".join(result.stdout.split())
        assert result.returncode != 0
        assert re.search(r"fatal: \[spark3\]: FAILED!.*gmu 0\.85 needs .* on this worker, but only .* is available", out), out[-4000:]
        assert re.search(r"largest: python3 \(pid \d+\) \d+\.\d GiB", out), out[-4000:]
        assert "lower engine_gpu_memory_utilization to" in out
        assert "spark3 failed a check above (the memory check: the relaunch would not fit there; or, on the head, vLLM" in out
        assert "No rank was stopped; the engine that runs now keeps serving" in out
        assert "Stop this node's rank (kept for a roll back" not in out
        assert _start_times() == before
        test_head_streams_a_chat_completion(False)  # still serving, after the refusal
    finally:
        hog.kill()
        subprocess.run(["docker", "exec", "spark3", "pkill", "-f", "bytearray"], check=False)
    # Without it, the same switch passes every check, spark3's memory included: its dry run (which runs every
    # check that only reads, the memory check before the stop among them) ends naming each rank it would restart.
    before = _node_state()
    output, changed = _run_playbook("playbooks/lane.yml", "-e", "lane=500k", "--check")
    assert _node_state() == before
    assert "on this worker, but only" not in output, output[-3000:]
    for name, rank in RANKS.items():
        assert f"dry run: {name} (rank {rank}) would restart: what it runs differs from this run." in output, output[-4000:]
    assert set(changed.values()) == {0}


@pytest.fixture
def alert_receiver():
    """The molecule's webhook (molecule/resources/alert_receiver.py) on the head, where monitoring_alert_webhook_url
    points -> a function returning every notice it kept."""
    subprocess.run(["docker", "cp", str(REPO / "molecule/resources/alert_receiver.py"), "spark1:/var/tmp/alert_receiver.py"], check=True)
    subprocess.run(["docker", "exec", "spark1", "rm", "-f", ALERTS_KEPT], check=True)
    subprocess.run(["docker", "exec", "-d", "spark1", "python3", "/var/tmp/alert_receiver.py", "127.0.0.1:9199", ALERTS_KEPT], check=True)

    def kept():
        lines = subprocess.run(["docker", "exec", "spark1", "sh", "-c", f"cat {ALERTS_KEPT} 2>/dev/null || true"], capture_output=True, text=True, check=True)
        return [json.loads(line) for line in lines.stdout.splitlines()]

    yield kept
    subprocess.run(["docker", "exec", "spark1", "pkill", "-f", "alert_receiver.py"], check=False)


def test_stop_leaves_no_rank_and_status_reports_it(alert_receiver):
    """stop.yml drains first: a stream longer than the drain timeout is cut, and its client sees an error. The
    stopped engine is an alert at the cluster's webhook within the rule's window."""
    in_flight = {}
    streamer = threading.Thread(target=_front_door_stream, args=(DRAINED_STREAM_TOKENS * 3, in_flight))
    streamer.start()
    _wait_until(lambda: in_flight.get("chunks", 0) >= 2, 120, "the stream's first tokens")
    stopping = time.time()
    output, _unused = _run_playbook("playbooks/stop.yml", "-e", "front_door_drain_timeout_s=3")
    streamer.join()
    assert "waited for 1 request(s) in flight, cut 1 at the 3 s drain timeout" in output, output[-3000:]
    assert in_flight["error"], in_flight  # broken: the client sees it, not a stream that ends as if complete
    assert in_flight["finish"] is None, in_flight
    for name in RANKS:
        left = subprocess.run(
            ["docker", "exec", name, "sh", "-c", f"docker ps -aq --filter name={CONTAINER}; pgrep -af '[v]llm serve' || true"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert left == "", f"{name}: {left}"
    output, changed = _run_playbook("playbooks/status.yml")
    assert "UNHEALTHY" in output
    assert "ranks up 0/4" in output
    assert "run lock on spark1: free (no run is changing this engine)" in output  # stop.yml released it
    # The last launch's timeline stays on the head after a stop (the YAML callback prints each line apart).
    assert "last launch:" in output
    assert "readiness of engine sparks, lane 1m" in output  # the lane switch's launch, the last one
    assert all(value == 0 for value in changed.values())

    def engine_down_notices():
        return [
            alert
            for notice in alert_receiver()
            if notice["status"] == "firing"
            for alert in notice["alerts"]
            if alert["labels"]["alertname"] == "SparkfleetEngineDown" and _utc_seconds(alert["startsAt"]) >= stopping - 2
        ]

    # Down at the next scrape (15 s), pending at the next evaluation (15 s), firing at the one after: within 45 s.
    _wait_until(engine_down_notices, 90, "SparkfleetEngineDown at the test receiver")
    (alert,) = engine_down_notices()[:1]
    assert alert["labels"]["sparkfleet_engine"] == "sparks"
    assert alert["labels"]["instance"] == "192.168.100.11:8000"
    assert alert["annotations"]["fix"].startswith("playbooks/status.yml says which rank is down")


def test_a_patch_made_for_another_base_refuses_to_start_anything(tmp_path):
    """The guard's manifest entry with another base sha256: the deploy stops before any rank starts."""
    patches = tmp_path / "patches"
    shutil.copytree(REPO / "patches", patches)
    manifest = (patches / "manifest.yml").read_text()
    (patches / "manifest.yml").write_text(re.sub(r"base_sha256: [0-9a-f]{64}", "base_sha256: " + "ab" * 32, manifest))
    result = subprocess.run(
        ["ansible-playbook", "-i", str(INVENTORY), str(REPO / "playbooks/lane.yml"), "-e", f"engine_patches_dir={patches}"],
        cwd=REPO, env=_env(), capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    folded = " ".join(result.stdout.split())
    assert result.returncode != 0
    assert (
        "patch sm12x-persistent-topk-guard-file was made against vLLM 0.32.0 (vllm/model_executor/layers/indexer_topk.py sha256 abababababab...),"
        " but the image has vLLM 0.32.0+cpu with sha256 4dc91f83043c... Nothing was started."
    ) in folded, folded[-3000:]
    for name in RANKS:
        left = subprocess.run(["docker", "exec", name, "docker", "ps", "-aq", "--filter", f"name={CONTAINER}"], capture_output=True, text=True, check=True)
        assert left.stdout.strip() == "", name


def test_two_spark_layout_deploys_tp2_from_inventory_alone():
    """inventory.example/two-sparks on the simulated nodes (cpu profile): TP=2 at the 262K lane."""
    two_nodes, started = REPO / "molecule/resources/inventory-two-node", time.time()
    output, _unused = _run_playbook("site.yml", inventory=two_nodes, hosts=("spark1", "spark2"))
    assert "engine sparks: 2 ranks, lane 262k (262144 x 6)" in output
    _assert_site_ended_with_the_bench_table_and_wrote_reports(output, started, "262k", ranks=2)
    # Another shape: nothing running proves its fabric, so the all-reduce ran, once (preflight, on the idle
    # nodes that hold the image; the engine does not repeat it for the same image).
    assert output.count("All-reduce across the engine's nodes, one rank per node") == 1, output[-6000:]
    assert "All-reduce not run" not in output
    for name, rank in (("spark1", "0"), ("spark2", "1")):
        args = json.loads(
            subprocess.run(["docker", "exec", name, "docker", "inspect", "-f", "{{json .Args}}", CONTAINER], capture_output=True, text=True, check=True).stdout
        )
        assert _flag(args, "--tensor-parallel-size") == "2"
        assert _flag(args, "--nnodes") == "2"
        assert _flag(args, "--node-rank") == rank
        assert _flag(args, "--master-port") == "29521"
        assert _flag(args, "--max-model-len") == "262144"
    for name in ("spark3", "spark4"):
        absent = subprocess.run(["docker", "exec", name, "docker", "ps", "-aq", "--filter", f"name={CONTAINER}"], capture_output=True, text=True, check=True)
        assert absent.stdout.strip() == ""
    response = httpx.post(
        f"{HEAD_API}/v1/chat/completions",
        json={"model": "glm-5.3-flash", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
        timeout=120,
    )
    assert response.status_code == 200
    assert response.json()["usage"]["completion_tokens"] >= 1
    # Left running: test_faults breaks and heals this two-rank engine (it boots in half the time of four).
