"""The monitoring role's rules (roles/monitoring/templates/sparkfleet-rules.yml.j2) under the distribution's promtool:
they load, and tests/promtool/sparkfleet_rules_test.yml fires every alert once and keeps it quiet once. The rules are
rendered as the role's template task renders them (trim_blocks), with the thresholds below."""

from __future__ import annotations

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


def test_a_profile_without_speculative_decoding_has_no_acceptance_alert(tmp_path):
    rules = _render(tmp_path, mtp_acceptance_min=0)
    assert "SparkfleetMTPAcceptanceLow" not in rules.read_text()
    assert _promtool("check", "rules", str(rules), cwd=tmp_path).returncode == 0


def test_every_vllm_metric_the_rules_read_is_one_vllm_exports():
    """The names, against the metric names vLLM's own source registers (the live server's /metrics is read in
    tests/integration/test_monitoring_metrics.py)."""
    import importlib.util  # noqa: PLC0415

    package = pathlib.Path(importlib.util.find_spec("vllm").submodule_search_locations[0])  # found, not imported (heavy)
    sources = [package / "v1/metrics/loggers.py", package / "v1/spec_decode/metrics.py"]
    registered = {name for source in sources for name in re.findall(r'"(vllm:[a-z_]+)"', source.read_text())}
    template = (ROOT / "roles/monitoring/templates/sparkfleet-rules.yml.j2").read_text()
    read = {re.sub(r"_(total|bucket|sum|count)$", "", name) for name in re.findall(r"vllm:[a-z_]+", template)}
    assert read <= registered, sorted(read - registered)
