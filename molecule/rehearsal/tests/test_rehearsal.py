"""The gb10 rehearsal on four simulated Sparks as they come (molecule/rehearsal).

Converge ran playbooks/rehearse.yml once, as a user runs it before a first deploy: the gb10 profile's own
values, a stock user outside the docker group, DGX OS's driver, NVIDIA's version strings, the stand-in for
the SM121 image pulled by digest. Test doubles stand only where the GB10 is: the GPU runtime hook, the RDMA
devices, nvidia-smi, the GB10's memory and fabric as files, libnccl.so.2 in the image. Here: what that run
left on every node, then a second run (nothing changed, the table, the closing line) and what it reported
of each rank's container.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
INVENTORY = REPO / "molecule/resources/inventory-rehearsal/hosts.yml"
NODES = ("spark1", "spark2", "spark3", "spark4")
# The nodes' containers on this machine: the scenario's cluster beside the default one (molecule.yml).
NODE_CONTAINER_PREFIX = os.environ.get("SIM_NODE_PREFIX", "")
CONTAINER = "vllm_glm53"
NCCL = "2.30.7-1+cuda13.3"
DGX_DRIVER = ("nvidia-driver-580-open", "580.95.05-0ubuntu0.24.04.2")
PATCH_TARGET = "/opt/vllm/lib/python3.11/site-packages/vllm/model_executor/layers/indexer_topk.py"


def _image_reference():
    return pathlib.Path(os.environ["SIM_REHEARSAL_IMAGE_FILE"]).read_text().strip()


@pytest.fixture(scope="module")
def second_run():
    """rehearse.yml again, as converge ran it: (return code, stdout, changed per node)."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    result = subprocess.run(
        ["ansible-playbook", "-i", str(INVENTORY), str(REPO / "playbooks/rehearse.yml")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip
    recap = dict(re.findall(r"^(spark\d)\s+:\s+ok=\d+\s+changed=(\d+)", result.stdout, re.M))
    return result.returncode, result.stdout, {node: int(count) for node, count in recap.items()}


@pytest.fixture(scope="module")
def report(second_run):
    assert second_run[0] == 0, second_run[1][-4000:]
    return json.loads((REPO / "reports/rehearsal-sparks.json").read_text())


# What the first run left on every node.


def test_the_deploy_user_was_given_the_docker_group_that_dgx_os_does_not(host):
    """A stock DGX OS user is not in the docker group: the first run reached Docker through sudo, then added it."""
    assert "docker" in host.check_output("id -nG nvidia").split()


def test_dgx_os_keeps_its_own_driver_and_no_node_rebooted(host):
    installed = host.package(DGX_DRIVER[0])
    assert installed.is_installed
    assert installed.version == DGX_DRIVER[1]
    assert not host.package("nvidia-open").is_installed  # the CUDA repository's driver never went over DGX OS's
    assert host.file("/etc/dgx-release").exists
    assert "Driver Version: 580.95.05" in host.check_output("nvidia-smi")


def test_the_gpu_clocks_are_locked_now_and_by_a_unit_enabled_for_every_boot(host):
    unit = host.file("/etc/systemd/system/sparkfleet-gpu-clocks.service")
    assert "ExecStart=nvidia-smi -lgc 200,2000" in unit.content_string
    link = host.file("/etc/systemd/system/multi-user.target.wants/sparkfleet-gpu-clocks.service")
    assert link.is_symlink
    assert link.linked_to == "/etc/systemd/system/sparkfleet-gpu-clocks.service"
    assert host.file("/var/lib/sparkfleet-sim/locked-clocks").content_string.strip() == "200,2000"  # what the GPU double was told


def test_nccl_is_nvidias_published_build_of_the_pinned_release_and_held(host):
    for package in ("libnccl2", "libnccl-dev"):
        assert host.package(package).version == NCCL
    assert {"libnccl2", "libnccl-dev"} <= set(host.check_output("apt-mark showhold").split())


def test_the_head_pulled_the_image_by_digest_and_the_workers_got_it_from_the_head(host):
    """No node pulled by tag on its own (the idle checks never pull): the head's image carries the registry's
    digest, the workers' the head's ID and no registry digest (docker load through the fan-out)."""
    name, digest = _image_reference().split("@")
    image = json.loads(host.check_output(f"sudo docker image inspect {name}"))[0]
    if host.backend.hostname == "spark1":
        assert f"{name.rsplit(':', 1)[0]}@{digest}" in image["RepoDigests"]
    else:
        assert image["RepoDigests"] == [], image["RepoDigests"]
    head = NODE_CONTAINER_PREFIX + "spark1"
    head_id = subprocess.run(["docker", "exec", head, "docker", "image", "inspect", "-f", "{{.Id}}", name], capture_output=True, text=True, check=True)
    assert image["Id"] == head_id.stdout.strip()


def test_the_images_nccl_is_what_its_library_answers(host):
    name = _image_reference().split("@")[0]
    image_id = host.check_output(f"sudo docker image inspect -f '{{{{.Id}}}}' {name}").split(":")[-1]
    probe = json.loads(host.check_output(f"sudo cat /opt/sparkfleet/image-nccl-{image_id}.json"))
    assert probe["nccl"] == "2.30.7", probe  # ncclGetVersion of the wheel's libnccl.so.2 (the double)
    assert probe["torch_nccl"] is None  # this torch was built without NCCL: torch's constant would have refused the image
    assert probe["packages"] == {"nvidia-nccl-cu13": "2.30.7"}


def test_dockerd_gave_a_container_the_gpu_through_the_runtime_hook(host):
    """The rehearsal's device check started a container with `--gpus=all --device=/dev/infiniband`: dockerd had
    registered its GPU driver (the hook double on its PATH) and runc called the hook as the prestart hook."""
    log = host.file("/var/log/nvidia-container-runtime-hook.log")
    assert log.exists
    assert [line for line in log.content_string.splitlines() if " prestart " in f" {line} "]


def test_no_rank_is_left_and_none_ever_started(host):
    names = host.check_output("sudo docker ps -a --format '{{.Names}}'").split()
    assert not [name for name in names if name.startswith(CONTAINER)], names


def _prometheus(path, **params):
    """One answer of the head's Prometheus (on its loopback), read on the head."""
    query = "&".join(f"{key}={value}" for key, value in params.items())
    head = NODE_CONTAINER_PREFIX + "spark1"
    answer = subprocess.run(["docker", "exec", head, "curl", "-sf", f"http://127.0.0.1:9090{path}?{query}"], capture_output=True, text=True, check=True)
    return json.loads(answer.stdout)["data"]


def _threshold(query):
    """The figure a rule's query compares below (`... < 1.5e+09 and ...`)."""
    found = re.search(r"< ([0-9.]+(?:e[+-]?[0-9]+)?)", query)
    assert found, query
    return float(found.group(1))


def test_the_monitoring_has_the_gb10_profiles_alerts_and_every_nodes_gpu_readings():
    """The monitoring role as the gb10 profile sets it up: its MTP and GPU clock alerts (profiles' monitoring figures)
    loaded and healthy in Prometheus, and every node's GPU reader (cron) scraped with the node: the nvidia-smi double
    answers the recorded GB10 table's power and temperature, and the clock a locked GB10 reads (the inventory's lock,
    [200, 2000]), above the profile's 1500 MHz: the clock alert is evaluated and quiet."""
    rules = {rule["name"]: rule for group in _prometheus("/api/v1/rules")["groups"] for rule in group["rules"]}
    assert {"SparkfleetMTPAcceptanceLow", "SparkfleetGPUClockLow"} <= set(rules), sorted(rules)
    # Prometheus answers each rule's query as it formats it (1500000000 comes back as 1.5e+09): compared as numbers.
    assert _threshold(rules["SparkfleetMTPAcceptanceLow"]["query"]) == 0.35, rules["SparkfleetMTPAcceptanceLow"]["query"]
    assert _threshold(rules["SparkfleetGPUClockLow"]["query"]) == 1500 * 1e6, rules["SparkfleetGPUClockLow"]["query"]
    assert all(rule["health"] == "ok" for rule in rules.values()), {name: rule.get("lastError") for name, rule in rules.items()}
    deadline = time.monotonic() + 90  # a scrape after cron's first minute at the latest
    while time.monotonic() < deadline:
        power = {item["metric"]["node"]: float(item["value"][1]) for item in _prometheus("/api/v1/query", query="sparkfleet_gpu_power_watts")["result"]}
        if len(power) == len(NODES):
            break
        time.sleep(5)
    assert power == dict.fromkeys(NODES, 3.0), power
    clock = {item["metric"]["node"]: float(item["value"][1]) for item in _prometheus("/api/v1/query", query="sparkfleet_gpu_sm_clock_hertz")["result"]}
    assert clock == dict.fromkeys(NODES, 2e9), clock
    clock_rule = next(rule for group in _prometheus("/api/v1/rules")["groups"] for rule in group["rules"] if rule["name"] == "SparkfleetGPUClockLow")
    assert (clock_rule["health"], clock_rule["state"]) == ("ok", "inactive"), clock_rule


# The second run, and what it reported.


def test_a_second_rehearsal_changes_nothing(second_run):
    rc, out, changed = second_run
    assert rc == 0, out[-4000:]
    assert changed == dict.fromkeys(NODES, 0), changed


def test_the_rehearsal_ends_with_every_node_ready_and_names_what_it_did_not_run(second_run, report):
    folded = " ".join(second_run[1].split())
    assert "Not run by this rehearsal: the start of the ranks (site.yml launches them; a rehearsal never starts one);" in folded, folded[-3000:]
    assert "what the clock burn and the all-reduce measure" in folded
    header, *rows = report["table"]
    assert header.split() == ["node", "rank", "driver", "nccl", "image", "container", "verdict"]
    assert [row.split()[0] for row in rows] == list(NODES)
    for row in rows:
        assert f"580.95.05 (DGX OS, {DGX_DRIVER[0]} {DGX_DRIVER[1]})  {NCCL}" in row, row
        assert row.endswith("gpus nvidia:all, /dev/infiniband, memlock=-1:-1, shm 10 GiB  ready"), row


def test_every_rank_was_created_with_the_gb10_container_spec(report):
    ranks = {node: facts["rank_container"] for node, facts in report["nodes"].items()}
    assert sorted(ranks) == list(NODES)
    image_id = None
    for node, rank in ranks.items():
        assert rank["state"] == "created", (node, rank["state"])  # made, never started
        assert rank["gpus"] == [{"driver": "nvidia", "count": -1, "capabilities": [["gpu"]]}]
        assert rank["devices"] == ["/dev/infiniband"]
        assert rank["ulimits"] == ["memlock=-1:-1"]
        assert rank["shm_size"] == 10 * 1024**3
        assert (rank["ipc_mode"], rank["network_mode"], rank["cap_add"]) == ("host", "host", ["IPC_LOCK"])
        assert "/var/tmp/models/glm53-flash-fp8:/model:ro" in rank["binds"]
        assert any(bind.endswith(f":{PATCH_TARGET}:ro") for bind in rank["binds"]), rank["binds"]  # the SM12x guard
        assert {"NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", "TORCH_CUDA_ARCH_LIST", "VLLM_HOST_IP"} <= set(rank["env_names"])
        # Every compile and JIT cache on the node, in the image's own directory (docs/warm-boots.md).
        assert f"/var/tmp/models/glm53-cache/images/{rank['image'].removeprefix('sha256:')[:12]}:/cache/image:rw" in rank["binds"], rank["binds"]
        assert {"VLLM_CACHE_ROOT", "TRITON_CACHE_DIR", "FLASHINFER_WORKSPACE_BASE", "DG_JIT_CACHE_DIR", "CUDA_CACHE_PATH"} <= set(rank["env_names"])
        argv = rank["argv"]
        assert argv[argv.index("--kv-cache-dtype") + 1] == "fp8_e4m3"
        assert argv[argv.index("--block-size") + 1] == "2304"
        assert ("--headless" in argv) == (node != "spark1")
        assert image_id in (None, rank["image"])
        image_id = rank["image"]
    assert report["not_run"][0].startswith("the start of the ranks")


# DGX OS owns the driver: a node that needs another stops the run, nothing installed, nothing rebooted.


def _node(name, command):
    return subprocess.run(["docker", "exec", NODE_CONTAINER_PREFIX + name, "sh", "-c", command], capture_output=True, text=True, check=True).stdout


def _snapshot():
    """What the host roles may change on every node, hashed: packages and selections, apt, Docker, the loaded
    driver and the boot id (a reboot writes a new one)."""
    command = (
        "dpkg-query -W -f '${Package} ${Version} ${Status}\\n' | sha256sum; apt-mark showhold;"
        " find /etc/apt /etc/docker /opt/sparkfleet -type f -exec sha256sum {} + 2>/dev/null | sort;"
        " cat /var/lib/sparkfleet-sim/loaded-driver /var/lib/sparkfleet-sim/boot-id"
    )
    return {node: _node(node, command) for node in NODES}


def _host_playbook(*extra, playbook="host.yml", env=None):
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", **(env or {}))
    result = subprocess.run(
        ["ansible-playbook", "-i", str(INVENTORY), str(REPO / "playbooks" / playbook), *extra],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    return result.returncode, " ".join(result.stdout.split())


def test_mixed_drivers_on_dgx_os_install_nothing_reboot_nothing_and_name_every_node(second_run):
    """spark2 comes back from a DGX OS update on a newer driver (seen on real GB10 pairs). By default the others
    would go up to it, with downgrades allowed spark2 down to the pin: on DGX OS neither happens. The run stops
    before any change, naming every node's version and package and DGX OS's own update; every node's state hash
    is unchanged (no package, no reboot)."""
    newer = "580.126.09-0ubuntu0.24.04.1"
    apt_get = "DEBIAN_FRONTEND=noninteractive apt-get -qq -y --allow-downgrades"
    try:
        _node("spark2", f"{apt_get} install {DGX_DRIVER[0]}={newer} >/dev/null && /opt/sparkfleet-sim/bin/sim-reboot")
        before = _snapshot()
        runs = {"default": _host_playbook(), "downgrades allowed": _host_playbook("-e", "nvidia_driver_allow_downgrade=true")}
        assert _snapshot() == before
        versions = {"spark1": DGX_DRIVER[1], "spark2": newer, "spark3": DGX_DRIVER[1], "spark4": DGX_DRIVER[1]}
        table = ", ".join(f"{node} {version.split('-', maxsplit=1)[0]} (DGX OS, {DGX_DRIVER[0]} {version})" for node, version in versions.items())
        for case, owned in (("default", "spark1, spark3, spark4"), ("downgrades allowed", "spark2")):
            rc, out = runs[case]
            assert rc != 0, case
            assert f"The nodes run {table}." in out, (case, out[-3000:])
            assert f"DGX OS owns the driver on {owned} (Canonical-signed packages, Secure Boot)" in out, (case, out[-3000:])
            assert "this role never replaces them nor reboots for them, and nothing was changed." in out
            assert "Update DGX OS on those nodes the way NVIDIA's DGX Spark User Guide documents" in out
    finally:
        _node("spark2", f"{apt_get} install {DGX_DRIVER[0]}={DGX_DRIVER[1]} >/dev/null && /opt/sparkfleet-sim/bin/sim-reboot")


# A stock user on nodes that already hold the image, one node without its RDMA devices: one run for both.


@pytest.fixture(scope="module")
def stock_user_run(second_run, tmp_path_factory):
    """rehearse.yml on nodes as a user comes to them after the hand recipe: the image already on every node (pulled
    with sudo), the deploy user not in the docker group, and spark3 without /dev/infiniband (a driver that did not
    load). New SSH connections (a fresh control path), so that the user's groups are read again."""
    report_file = REPO / "reports/rehearsal-sparks.json"
    env = {"ANSIBLE_SSH_CONTROL_PATH_DIR": str(tmp_path_factory.mktemp("cp"))}
    try:
        for node in NODES:
            _node(node, "gpasswd -d nvidia docker >/dev/null")
        _node("spark3", "mv /dev/infiniband /dev/infiniband.away")
        rc, out = _host_playbook(playbook="rehearse.yml", env=env)
        rows = {row["node"]: row for row in json.loads(report_file.read_text())["rows"]}
        groups = {node: _node(node, "id -nG nvidia").split() for node in NODES}
    finally:
        _node("spark3", "[ -e /dev/infiniband ] || mv /dev/infiniband.away /dev/infiniband")
        for node in NODES:
            _node(node, "usermod -aG docker nvidia")
    return rc, out, rows, groups


def test_a_stock_user_reads_the_image_the_nodes_already_hold_and_burns_them_in_preflight(stock_user_run):
    """Docker's socket refuses a stock DGX OS user: preflight's reads go through sudo, so the image the nodes hold
    reads as held (not as "no image" through a refused socket), and the clock burn runs in preflight, not later."""
    _unused, out, _unused, groups = stock_user_run
    preflight = out.split("PLAY [Prepare the nodes]")[0]
    assert "Clock burn not run on" not in preflight, preflight[-3000:]
    burn = preflight.split("TASK [sparkfleet.vllm.preflight : Burn each GPU for a few seconds and read its SM clock]")[1].split("TASK [")[0]
    for node in NODES:
        assert f"ok: [{node}]" in burn, burn  # its container made with the image the node held (docker create)
        assert "docker" in groups[node], (node, groups[node])  # the host role gave the group back


def test_a_node_without_its_rdma_devices_is_its_row_with_the_fix_and_the_others_stay_ready(stock_user_run):
    """spark3 lost /dev/infiniband (Docker makes a container with a missing device and refuses only to start it).
    The rehearsal runs on to the end on every node: spark3's row says what Docker refused and the fix, the other
    three are ready, and the run fails naming spark3."""
    rc, out, rows, _unused = stock_user_run
    assert rc != 0, out[-3000:]
    assert "The rehearsal found 1 of 4 nodes not ready: spark3. Each one's row says what is missing and the fix" in out, out[-3000:]
    assert [node for node, row in rows.items() if row["verdict"] == "ready"] == ["spark1", "spark2", "spark4"]
    verdict = rows["spark3"]["verdict"]
    assert "Docker on spark3 cannot start a container with profile gb10's GPUs and devices" in verdict, verdict
    assert "/dev/infiniband is missing on spark3 (profiles[gb10].devices): check that the devices exist (ls /dev/infiniband;" in verdict, verdict
    assert "spark3" in out.split("Show the rehearsal's table, one row per node")[1], out[-3000:]
