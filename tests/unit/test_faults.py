"""Faults and secrets: the watch rule (module_utils/watchdog + the engine_watch module as Ansible runs it)
and the checks of the access settings and firewall rules (module_utils/access)."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import access, watchdog

REPO = pathlib.Path(__file__).resolve().parents[2]
MODULE = REPO / "plugins/modules/engine_watch.py"
KEY = "k3y-" + "x" * 28


# --- the recovery rule -----------------------------------------------------------


def test_three_failures_in_a_row_relaunch_once_then_the_count_starts_again():
    state, decisions = dict(watchdog.EMPTY_STATE, relaunches=[]), []
    for second in range(4):
        state, decision = watchdog.judge(state, False, 1000.0 + second, 3, 2)
        decisions.append(decision)
    assert decisions == ["failing", "failing", "relaunch", "failing"]
    assert state == {"failures": 1, "relaunches": [1002.0]}


def test_a_healthy_probe_ends_a_streak_as_recovered_and_a_steady_one_changes_nothing():
    state, decision = watchdog.judge({"failures": 2, "relaunches": []}, True, 50.0, 3, 2)
    assert (state, decision) == ({"failures": 0, "relaunches": []}, "recovered")
    assert watchdog.judge(state, True, 60.0, 3, 2) == (state, "healthy")


def test_the_hourly_cap_holds_relaunches_back_until_an_hour_has_passed():
    state = {"failures": 0, "relaunches": [0.0, 100.0]}
    state, decision = watchdog.judge(state, False, 200.0, 1, 2)
    assert decision == "capped"
    assert state["relaunches"] == [0.0, 100.0]
    # The first relaunch leaves the window after an hour: one more is allowed.
    state, decision = watchdog.judge(state, False, 3600.5, 1, 2)
    assert decision == "relaunch"
    assert state["relaunches"] == [100.0, 3600.5]
    assert watchdog.judge({"failures": 0, "relaunches": []}, False, 1.0, 1, 0)[1] == "capped"


@pytest.mark.parametrize(
    ("failures", "cap", "message"),
    [
        (0, 2, "watch_failures_before_relaunch 0 must be 1 or more"),
        (3, -1, "watch_max_relaunches_per_hour -1 must be 0"),
        ("three", 2, "must be whole numbers"),
    ],
)
def test_bad_watch_settings_are_refused(failures, cap, message):
    with pytest.raises(watchdog.WatchError, match=message):
        watchdog.checked_policy(failures, cap)


def test_state_survives_a_round_trip_and_a_damaged_file_says_what_to_do(tmp_path):
    path = str(tmp_path / "watch/state.json")
    assert watchdog.load_state(path) == {"failures": 0, "relaunches": []}
    watchdog.save_state(path, {"failures": 2, "relaunches": [5.0]})
    assert watchdog.load_state(path) == {"failures": 2, "relaunches": [5.0]}
    pathlib.Path(path).write_text("{not json")
    with pytest.raises(watchdog.WatchError, match=r"is not a watch state file .*remove it"):
        watchdog.load_state(path)


def run_module(tmp_path, **args):
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"state_dir": str(tmp_path / "watch"), **args}}))
    env = dict(os.environ, PYTHONPATH=str(REPO / "collections"))
    result = subprocess.run([sys.executable, str(MODULE), str(args_file)], capture_output=True, text=True, env=env, check=False)
    return json.loads(result.stdout)


def events(tmp_path):
    log = tmp_path / "watch/events.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_the_module_counts_probes_logs_each_event_and_is_quiet_when_healthy(tmp_path):
    healthy = run_module(tmp_path, healthy=True)
    assert (healthy["changed"], healthy["decision"], healthy["event"]) == (False, "healthy", None)
    assert events(tmp_path) == []
    first = run_module(tmp_path, healthy=False, reason="spark3: exited (exit code 137)", failures_before_relaunch=2)
    second = run_module(tmp_path, healthy=False, reason="spark3: exited (exit code 137)", failures_before_relaunch=2)
    assert (first["decision"], first["failures"], second["decision"]) == ("failing", 1, "relaunch")
    assert second["relaunches_last_hour"] == 1
    run_module(tmp_path, outcome="relaunched", detail="lane 500k")
    capped = run_module(tmp_path, healthy=False, reason="spark1: exited", failures_before_relaunch=1, max_relaunches_per_hour=1)
    assert capped["decision"] == "capped"
    assert "cap: 1 relaunches per hour reached" in capped["event"]["reason"]
    assert [event["decision"] for event in events(tmp_path)] == ["failing", "relaunch", "relaunched", "capped"]
    assert events(tmp_path)[0]["reason"] == "spark3: exited (exit code 137)"


def test_the_module_refuses_bad_settings_and_check_mode_writes_nothing(tmp_path):
    out = run_module(tmp_path, healthy=False, failures_before_relaunch=0)
    assert out["failed"]
    assert "watch_failures_before_relaunch 0 must be 1 or more" in out["msg"]
    out = run_module(tmp_path, healthy=False, _ansible_check_mode=True)
    assert out["decision"] == "failing"
    assert not (tmp_path / "watch").exists()


# --- access settings ----------------------------------------------------------------


def test_a_short_or_spaced_api_key_is_refused_without_quoting_it():
    for key in ("short-key", "sixteen chars ok!x"):
        with pytest.raises(access.AccessError) as error:
            access.checked_api_key(key)
        assert key not in str(error.value)
        assert "openssl rand -hex 24" in str(error.value)
    assert access.checked_api_key(KEY) == KEY
    assert access.checked_api_key("") == ""
    assert access.checked_api_key(None) == ""


def test_a_key_in_extra_args_is_refused():
    with pytest.raises(access.AccessError, match="set engine_api_key"):
        access.checked_extra_args(["--enable-prefix-caching", "--api-key=abc"])
    assert access.checked_extra_args(["--enable-prefix-caching"]) == ["--enable-prefix-caching"]


def test_bind_address_ports_and_clients_are_checked_naming_the_value():
    assert access.checked_bind_address(" 192.168.100.11") == "192.168.100.11"
    with pytest.raises(access.AccessError, match="engine_api_host 'spark1' is not an IP address"):
        access.checked_bind_address("spark1")
    assert access.checked_ports({"engine_port": "8000", "engine_master_port": 29500}) == {"engine_port": 8000, "engine_master_port": 29500}
    with pytest.raises(access.AccessError, match="engine_master_port and engine_port are both 8000"):
        access.checked_ports({"engine_port": 8000, "engine_master_port": 8000})
    with pytest.raises(access.AccessError, match="engine_port 70000 is outside 1-65535"):
        access.checked_ports({"engine_port": 70000})
    assert access.checked_client_networks(["10.0.0.7", "10.0.1.9/24"]) == ["10.0.0.7/32", "10.0.1.0/24"]
    with pytest.raises(access.AccessError, match=r"entry '10\.0\.0\.300' is not an address or network"):
        access.checked_client_networks(["10.0.0.300"])
    with pytest.raises(access.AccessError, match="must be a list"):
        access.checked_client_networks("10.0.0.0/24")


def test_firewall_rules_admit_the_cluster_everywhere_and_clients_to_the_api_only():
    rules = access.firewall_rules(8000, [29500, 29410], ["192.168.100.11", "192.168.100.12"], ["10.0.0.0/24"])
    table = [(rule["port"], rule["source"], rule["jump"]) for rule in rules]
    assert table == [
        (8000, "192.168.100.11/32", "ACCEPT"), (8000, "192.168.100.12/32", "ACCEPT"),
        (8000, "127.0.0.0/8", "ACCEPT"), (8000, "10.0.0.0/24", "ACCEPT"), (8000, None, "DROP"),
        (29500, "192.168.100.11/32", "ACCEPT"), (29500, "192.168.100.12/32", "ACCEPT"), (29500, None, "DROP"),
        (29410, "192.168.100.11/32", "ACCEPT"), (29410, "192.168.100.12/32", "ACCEPT"), (29410, None, "DROP"),
    ]  # fmt: skip
    assert all(rule["comment"].startswith("sparkfleet: ") for rule in rules)
    assert len({rule["comment"] for rule in rules}) == len(rules)  # each rule is found again by its comment


def test_the_front_door_and_prometheus_of_another_engine_reach_the_api_and_nothing_else():
    """The eight-Spark layout: engine_b's nodes admit engine_a's head (the front door's and Prometheus's node) to the
    API, by its fabric and SSH addresses, but not to the master or fan-out port; a host name is left out."""
    rules = access.firewall_rules(
        8000, [29500], ["192.168.100.15", "192.168.100.16"], ["10.0.0.0/24"], ["192.168.100.11", "10.0.0.11", "192.168.100.11", "spark1"]
    )
    table = [(rule["port"], rule["source"], rule["jump"]) for rule in rules]
    assert table == [
        (8000, "192.168.100.15/32", "ACCEPT"), (8000, "192.168.100.16/32", "ACCEPT"), (8000, "127.0.0.0/8", "ACCEPT"),
        (8000, "192.168.100.11/32", "ACCEPT"), (8000, "10.0.0.11/32", "ACCEPT"), (8000, "10.0.0.0/24", "ACCEPT"), (8000, None, "DROP"),
        (29500, "192.168.100.15/32", "ACCEPT"), (29500, "192.168.100.16/32", "ACCEPT"), (29500, None, "DROP"),
    ]  # fmt: skip
    assert "(the front door and Prometheus)" in rules[3]["comment"]
    # On the engine whose head runs them, they are its own nodes: no rule more than before.
    own = access.firewall_rules(8000, [29500], ["192.168.100.11", "192.168.100.12"], [], ["192.168.100.11", "192.168.100.11"])
    assert own == access.firewall_rules(8000, [29500], ["192.168.100.11", "192.168.100.12"], [])


def test_a_printed_rule_becomes_the_argv_that_deletes_it_without_a_shell():
    line = '-A INPUT -s 192.168.100.11/32 -p tcp -m tcp --dport 8000 -m comment --comment "sparkfleet:api from 192.168.100.11" -j ACCEPT'
    assert access.firewall_delete_argv(line) == [
        "-D", "INPUT", "-s", "192.168.100.11/32", "-p", "tcp", "-m", "tcp", "--dport", "8000",
        "-m", "comment", "--comment", "sparkfleet:api from 192.168.100.11", "-j", "ACCEPT",
    ]  # fmt: skip
    assert access.firewall_delete_argv('-A INPUT -m comment --comment "sparkfleet:x; rm -rf /" -j DROP')[5] == "sparkfleet:x; rm -rf /"
    with pytest.raises(access.AccessError, match="is not a rule line"):
        access.firewall_delete_argv("-P INPUT ACCEPT")


def test_front_door_clients_are_named_each_with_a_key_of_its_own_and_no_message_quotes_a_key():
    alice, bob = {"name": "alice", "key": "a" * 20}, {"name": "bob.ci", "key": "b" * 20}
    assert access.checked_front_door_clients([alice, bob]) == [alice, bob]
    assert access.checked_front_door_clients([]) == []
    assert access.checked_front_door_clients(None) == []
    cases = [
        ({"name": "alice"}, "entry 2 must have exactly a name and a key"),
        ({"name": "al ice", "key": "c" * 20}, "name 'al ice' must be a word"),
        ({"name": "alice", "key": "d" * 20}, "names 'alice' twice"),
        ({"name": "carol", "key": "short-key"}, "'carol': its key is 9 characters long; use at least 16"),
        ({"name": "dave", "key": "a" * 20}, "'dave' has the key of another client"),
        ({"name": "erin", "key": ""}, "'erin' has an empty key"),
    ]
    for bad, message in cases:
        with pytest.raises(access.AccessError, match=re.escape(message)) as raised:
            access.checked_front_door_clients([alice, bad])
        assert "a" * 20 not in str(raised.value)
        assert "short-key" not in str(raised.value)
    with pytest.raises(access.AccessError, match="must be a list of"):
        access.checked_front_door_clients({"name": "alice", "key": "a" * 20})


def test_the_front_doors_and_prometheuss_node_is_the_one_set_among_the_clusters_nodes_else_the_first_engines_head():
    nodes, heads = ["spark1", "spark2", "spark5", "spark6"], iter(["spark1", "spark5"])  # a map() of the heads, as Jinja passes it
    assert access.service_node("", "front_door_node", nodes, heads) == "spark1"
    assert access.service_node(None, "monitoring_node", nodes, ["spark5"]) == "spark5"
    assert access.service_node("spark6", "monitoring_node", nodes, ["spark1"]) == "spark6"
    typo = "front_door_node is 'spark9', which is not one of the cluster's nodes (spark1, spark2, spark5, spark6): name the node it runs on, or leave"
    with pytest.raises(access.AccessError, match=re.escape(typo) + ".* first engine's head \\(spark1\\)"):
        access.service_node("spark9", "front_door_node", nodes, ["spark1"])
    # Unchecked: the cluster role names the node so, after its own refusal (while the service is on) has run.
    assert access.service_node("spark9", "monitoring_node", nodes, ["spark1"], checked=False) == "spark9"


def test_a_grafana_node_is_an_inventory_host_that_reaches_prometheus():
    hosts = ["spark1", "spark2", "desk"]
    assert access.checked_grafana_node("", hosts, "spark1") == ""
    assert access.checked_grafana_node("spark1", hosts, "spark1") == "spark1"  # beside Prometheus: its loopback will do
    assert access.checked_grafana_node("desk", hosts, "spark1", "0.0.0.0") == "desk"
    assert access.checked_grafana_node("desk", hosts, "spark1", "192.168.100.11") == "desk"
    with pytest.raises(access.AccessError, match=re.escape("monitoring_grafana_node is 'grafana1', which is not a host of the inventory")):
        access.checked_grafana_node("grafana1", hosts, "spark1")
    unreachable = "monitoring_grafana_node is desk, but Prometheus listens on 127.0.0.1 of spark1 only, which desk cannot reach: set monitoring_listen_address"
    with pytest.raises(access.AccessError, match=re.escape(unreachable)):
        access.checked_grafana_node("desk", hosts, "spark1", "127.0.0.1")
    with pytest.raises(access.AccessError, match=re.escape("monitoring_listen_address 'spark1' is not an IP address")):
        access.checked_grafana_node("desk", hosts, "spark1", "spark1")


def test_the_benchmark_client_is_one_of_the_front_doors_clients():
    alice, bob = {"name": "alice", "key": "a" * 20}, {"name": "bob", "key": "b" * 20}
    assert access.checked_front_door_clients([alice, bob], bench_client="bob") == [alice, bob]
    assert access.checked_front_door_clients([alice, bob], bench_client="") == [alice, bob]
    unknown = "smoke_bench_front_door_client is 'carol', which is not one of front_door_clients (alice, bob)"
    with pytest.raises(access.AccessError, match=re.escape(unknown)) as raised:
        access.checked_front_door_clients([alice, bob], bench_client="carol")
    assert "a" * 20 not in str(raised.value)
    with pytest.raises(access.AccessError, match=re.escape("'carol', but front_door_clients lists no client")):
        access.checked_front_door_clients([], bench_client="carol")
