"""Cluster layouts from inventory alone: four, two (NVFP4, TP=2) and eight Sparks (two engines).

playbooks/render.yml runs preflight and renders every rank without connecting
to any host, so the layouts are checked here without eight machines.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def render(inventory, *extra):
    binary = shutil.which("ansible-playbook")
    assert binary, "ansible-playbook is not on PATH (make venv)"
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    result = subprocess.run(
        [binary, "-i", str(REPO / inventory), str(REPO / "playbooks/render.yml"), *extra],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    report = json.loads(result.stdout)
    return result.returncode, report


def ranks(report):
    shown = report["plays"][0]["tasks"][-1]["hosts"]
    return {host: result["msg"] for host, result in shown.items()}


def flag(argv, name):
    return argv[argv.index(name) + 1]


def test_four_sparks_one_engine():
    code, report = render("inventory.example/hosts.yml")
    assert code == 0
    shown = ranks(report)
    assert {host: item["rank"] for host, item in shown.items()} == {"spark1": 0, "spark2": 1, "spark3": 2, "spark4": 3}
    assert {flag(item["argv"], "--tensor-parallel-size") for item in shown.values()} == {"4"}
    assert shown["spark2"]["env"]["NCCL_IB_HCA"] == "rocep1s0f0,roceP2p1s0f0"
    assert shown["spark2"]["env"]["GLOO_SOCKET_IFNAME"] == "enp1s0f0np0"


def test_two_sparks_nvfp4_tp2():
    code, report = render("inventory.example/two-sparks/hosts.yml")
    assert code == 0
    shown = ranks(report)
    head, worker = shown["spark1"]["argv"], shown["spark2"]["argv"]
    assert flag(head, "--tensor-parallel-size") == "2"
    assert flag(head, "--nnodes") == "2"
    assert flag(head, "--max-model-len") == "262144"
    assert flag(head, "--max-num-seqs") == "6"
    assert flag(head, "--master-port") == "29521"
    assert flag(head, "--moe-backend") == "marlin"
    assert flag(head, "--kv-cache-memory-bytes") == "6442450944"
    assert "--enforce-eager" in head
    assert worker[-1] == "--headless"
    assert shown["spark1"]["env"]["NCCL_CROSS_NIC"] == "0"
    assert shown["spark1"]["env"]["NCCL_IB_HCA"] == "rocep1s0f0"


def test_eight_sparks_are_two_independent_engines():
    code, report = render("inventory.example/eight-sparks/hosts.yml")
    assert code == 0
    shown = ranks(report)
    engines = {}
    for host, item in shown.items():
        engines.setdefault(item["engine"], {})[host] = item
    assert set(engines) == {"engine_a", "engine_b"}
    for name, head, address, port in (("engine_a", "spark1", "192.168.100.11", "29500"), ("engine_b", "spark5", "192.168.100.15", "29510")):
        members = engines[name]
        assert len(members) == 4
        assert members[head]["rank"] == 0
        assert sorted(item["rank"] for item in members.values()) == [0, 1, 2, 3]
        for item in members.values():
            assert flag(item["argv"], "--master-addr") == address
            assert flag(item["argv"], "--master-port") == port
            assert flag(item["argv"], "--tensor-parallel-size") == "4"
            assert flag(item["argv"], "--nnodes") == "4"


def test_api_key_is_redacted_in_the_rendered_view():
    code, report = render("inventory.example/hosts.yml", "-e", "engine_api_key=not-for-display-1234")
    assert code == 0
    assert "not-for-display-1234" not in json.dumps(report)
    shown = ranks(report)
    assert shown["spark1"]["env"]["VLLM_API_KEY"] == "<redacted>"
    assert "--api-key" not in shown["spark1"]["argv"]
    assert "VLLM_API_KEY" not in shown["spark2"]["env"]  # the head alone serves the API


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["-e", "lane=300k"], "Unknown lane '300k'. Valid lanes: 1m, 200k, 500k."),
        (["-e", "engine_tensor_parallel_size=8"], "engine_tensor_parallel_size=8 x pipeline 1 needs 8 GPUs, but the engine group has 4 node(s)"),
        (["-e", "profile=h100"], "Unknown profile 'h100'. Valid profiles: cpu, gb10, gb10_nvfp4."),
        (["-e", "engine_head=spark9"], "engine_head 'spark9' is not a host of engine group 'sparks'"),
        (["--limit", "spark1,spark2"], "is not in this run (--limit?). An engine cannot start on part of its nodes."),
        (["-e", "front_door_node=spark9"], "front_door_node is 'spark9', which is not one of the cluster's nodes (spark1, spark2, spark3, spark4)"),
        (["-e", "monitoring_grafana_node=spark2"], "monitoring_grafana_node is spark2, but Prometheus listens on 127.0.0.1 of spark1 only"),
    ],
)
def test_bad_input_fails_in_preflight_with_the_documented_message(extra, message):
    code, report = render("inventory.example/hosts.yml", *extra)
    assert code != 0
    assert message in json.dumps(report).replace("\\n", " ")


def test_the_settings_of_a_service_that_is_off_are_not_refused():
    """The two refusals above, with the front door and Prometheus off: no node of theirs to check, nothing to refuse."""
    code, report = render(
        "inventory.example/hosts.yml",
        *["-e", "front_door_node=spark9", "-e", "front_door_enabled=false"],
        *["-e", "monitoring_grafana_node=spark2", "-e", "monitoring_enabled=false"],
    )
    assert code == 0, json.dumps(report)[-2000:]
    assert set(ranks(report)) == {"spark1", "spark2", "spark3", "spark4"}


def test_each_of_eight_sparks_engines_checks_its_own_fabric_addresses(tmp_path):
    """The second engine's nodes are checked too, not only the first host's engine."""
    shutil.copytree(REPO / "inventory.example/eight-sparks", tmp_path / "eight-sparks")
    hosts = tmp_path / "eight-sparks/hosts.yml"
    hosts.write_text(hosts.read_text().replace("spark6: {ansible_host: 192.168.100.16}", "spark6: {ansible_host: 192.168.100.15}"))
    code, report = render(hosts)
    assert code != 0
    assert "Two nodes of engine group 'engine_b' share a fabric address" in json.dumps(report)


def test_a_node_in_two_engines_is_refused_naming_both(tmp_path):
    """eight-sparks with engine_a's engine_group left out: its nodes would name the parent group `sparks`, which
    also holds engine_b's nodes. Refused before anything reaches a node, naming the nodes of the other engine."""
    shutil.copytree(REPO / "inventory.example/eight-sparks", tmp_path / "eight-sparks")
    hosts = tmp_path / "eight-sparks/hosts.yml"
    hosts.write_text(hosts.read_text().replace("engine_group: engine_a\n", "", 1))
    code, report = render(hosts)
    assert code != 0
    assert (
        "spark1's engine group 'sparks' (spark1, spark2, spark3, spark4, spark5, spark6, spark7, spark8) holds spark5, spark6,"
        " spark7, spark8, whose engine_group names another engine: a node serves one engine."
    ) in " ".join(json.dumps(report).replace("\\n", " ").split())
