"""The monitoring role's rules (roles/monitoring/templates/sparkfleet-rules.yml.j2) under the distribution's promtool:
they load, and tests/promtool/sparkfleet_rules_test.yml fires every alert once and keeps it quiet once. The rules are
rendered as the role's template task renders them (trim_blocks), with the thresholds below."""

from __future__ import annotations

import json
import pathlib
import re
import shutil
import subprocess

import jinja2
import yaml

ROOT = pathlib.Path(__file__).parents[2]
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
THRESHOLDS = {
    "engine_down_for": "1m", "no_progress_for": "2m", "latency_for": "5m", "ttft_p95_s_max": 2, "itl_p95_s_max": 0.1,
    "kv_cache_usage_max": 0.95, "kv_cache_for": "5m", "mtp_acceptance_min": 0.5, "mtp_for": "5m",
    "node_memory_available_min_bytes": 2000000000, "node_memory_for": "5m",
    "gpu_sm_clock_min_mhz": 1500, "gpu_busy_min": 0.5, "gpu_clock_for": "5m",
}  # fmt: skip


def _render(directory, **alerts):
    templates = jinja2.Environment(loader=jinja2.FileSystemLoader(ROOT / "roles/monitoring/templates"), trim_blocks=True, keep_trailing_newline=True)
    rules = directory / "sparkfleet-rules.yml"
    rules.write_text(templates.get_template("sparkfleet-rules.yml.j2").render(ansible_managed="Ansible managed", monitoring_alerts=THRESHOLDS | alerts))
    return rules


def _promtool(*args, cwd):
    assert pathlib.Path(PROMTOOL).exists(), "promtool is missing: make host-check installs the distribution's prometheus package"
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, check=False)


def test_the_rules_load_and_every_alert_fires_once_and_stays_quiet_once(tmp_path):
    rules = _render(tmp_path)
    checked = _promtool("check", "rules", str(rules), cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    shutil.copy(ROOT / "tests/promtool/sparkfleet_rules_test.yml", tmp_path)
    tested = _promtool("test", "rules", "sparkfleet_rules_test.yml", cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    alerts = {rule["alert"] for group in yaml.safe_load(rules.read_text())["groups"] for rule in group["rules"] if "alert" in rule}
    cases = yaml.safe_load((ROOT / "tests/promtool/sparkfleet_rules_test.yml").read_text())["tests"]
    checks = [check for case in cases for check in case["alert_rule_test"]]
    fired = {check["alertname"] for check in checks if check["exp_alerts"]}
    quiet = {check["alertname"] for check in checks if not check["exp_alerts"]}
    assert alerts == fired == quiet, (alerts, fired, quiet)


def test_a_profile_without_speculative_decoding_or_gpus_has_no_acceptance_or_clock_alert(tmp_path):
    rules = _render(tmp_path, mtp_acceptance_min=0, gpu_sm_clock_min_mhz=0)
    assert "SparkfleetMTPAcceptanceLow" not in rules.read_text()
    assert "SparkfleetGPUClockLow" not in rules.read_text()
    assert _promtool("check", "rules", str(rules), cwd=tmp_path).returncode == 0


def test_every_vllm_metric_the_rules_read_is_one_vllm_exports():
    """The names, against the metric names vLLM's own source registers (the live server's /metrics is read in
    tests/integration/test_monitoring_metrics.py)."""
    import importlib.util

    package = pathlib.Path(importlib.util.find_spec("vllm").submodule_search_locations[0])  # found, not imported (heavy)
    sources = [package / "v1/metrics/loggers.py", package / "v1/spec_decode/metrics.py"]
    registered = {name for source in sources for name in re.findall(r'"(vllm:[a-z_]+)"', source.read_text())}
    template = (ROOT / "roles/monitoring/templates/sparkfleet-rules.yml.j2").read_text()
    read = {re.sub(r"_(total|bucket|sum|count)$", "", name) for name in re.findall(r"vllm:[a-z_]+", template)}
    assert read <= registered, sorted(read - registered)


DASHBOARD = ROOT / "roles/monitoring/files/sparkfleet-dashboard.json"


def test_every_vllm_metric_the_dashboard_reads_is_one_vllm_exports_and_every_panel_has_a_query():
    """The dashboard's names against vLLM's source (molecule resolves every query against the simulated engine's
    Prometheus: test_every_dashboard_panel_query_returns_the_simulated_engines_series)."""
    import importlib.util

    package = pathlib.Path(importlib.util.find_spec("vllm").submodule_search_locations[0])
    sources = [package / "v1/metrics/loggers.py", package / "v1/spec_decode/metrics.py"]
    registered = {name for source in sources for name in re.findall(r'"(vllm:[a-z_]+)"', source.read_text())}
    dashboard = json.loads(DASHBOARD.read_text())
    panels = dashboard["panels"]
    assert len({panel["id"] for panel in panels}) == len(panels)
    exprs = [target["expr"] for panel in panels for target in panel["targets"]]
    assert all(panel["targets"] for panel in panels)
    read = {re.sub(r"_(total|bucket|sum|count)$", "", name) for expr in exprs for name in re.findall(r"vllm:[a-z_]+", expr)}
    assert read <= registered, sorted(read - registered)
    # Every query follows the engine picker, so one dashboard serves a cluster of several engines.
    assert all('sparkfleet_engine=~"$engine"' in expr for expr in exprs), [expr for expr in exprs if "$engine" not in expr]


def _render_alertmanager(directory, webhook):
    templates = jinja2.Environment(loader=jinja2.FileSystemLoader(ROOT / "roles/monitoring/templates"), trim_blocks=True, keep_trailing_newline=True)
    config = directory / "alertmanager.yml"
    config.write_text(
        templates.get_template("alertmanager.yml.j2").render(
            ansible_managed="Ansible managed", monitoring_alert_webhook_url=webhook, monitoring_alert_group_wait_s=30, monitoring_alert_repeat_interval="4h"
        )
    )
    return config


def test_alertmanager_sends_every_alert_to_the_named_webhook_or_keeps_them(tmp_path):
    amtool = shutil.which("amtool") or "/usr/bin/amtool"
    assert pathlib.Path(amtool).exists(), "amtool is missing: make host-check installs the distribution's prometheus-alertmanager"
    for webhook, receiver in (("http://chat.example:9199/alerts", "sparkfleet-webhook"), ("", "sparkfleet-kept")):
        config = _render_alertmanager(tmp_path, webhook)
        checked = subprocess.run([amtool, "check-config", str(config)], capture_output=True, text=True, check=False)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        loaded = yaml.safe_load(config.read_text())
        assert loaded["route"]["receiver"] == receiver
        (only,) = loaded["receivers"]
        assert only["name"] == receiver
        assert only.get("webhook_configs", [{}])[0].get("url", "") == webhook


def test_prometheus_configuration_as_the_role_renders_it_passes_promtool_check_config(tmp_path):
    """prometheus.yml.j2 for two engines of two nodes, with the rules beside it: the distribution's promtool accepts
    both (the role checks the same on the node before it writes them)."""
    rules = _render(tmp_path)
    hostvars = {
        node: {"sparkfleet_head_address": head_address, "sparkfleet_fabric_address": address, "sparkfleet_engine_group": engine}
        for node, head_address, address, engine in (
            ("spark1", "10.0.0.1", "10.0.0.1", "first_pair"),
            ("spark2", "10.0.0.1", "10.0.0.2", "first_pair"),
            ("spark3", "10.0.0.3", "10.0.0.3", "second_pair"),
            ("spark4", "10.0.0.3", "10.0.0.4", "second_pair"),
        )
    }
    templates = jinja2.Environment(loader=jinja2.FileSystemLoader(ROOT / "roles/monitoring/templates"), trim_blocks=True, keep_trailing_newline=True)
    config = tmp_path / "prometheus.yml"
    config.write_text(
        templates.get_template("prometheus.yml.j2").render(
            ansible_managed="Ansible managed",
            hostvars=hostvars,
            ansible_play_hosts=list(hostvars),
            monitoring_heads=["spark1", "spark3"],
            monitoring_scrape_interval_s=15,
            monitoring_rules_path=str(rules),
            monitoring_node_exporter_port=9100,
            monitoring_alertmanager_port=9093,
        )
    )
    checked = _promtool("check", "config", str(config), cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    loaded = yaml.safe_load(config.read_text())
    engines = loaded["scrape_configs"][0]["static_configs"]
    assert [(target["targets"], target["labels"]["sparkfleet_engine"]) for target in engines] == [
        (["10.0.0.1:8000"], "first_pair"),
        (["10.0.0.3:8000"], "second_pair"),
    ]
    assert len(loaded["scrape_configs"][1]["static_configs"]) == 4
