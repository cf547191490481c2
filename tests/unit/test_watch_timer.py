"""playbooks/watch_timer.yml's units as its template task writes them: rendered by ansible-core's own Templar from the
playbook's own vars, in a process of their own (the env lookup needs Ansible's plugin loader, whose collection finder
would change how the other tests import the collection). No systemd here to start them (docs/operations.md)."""

from __future__ import annotations

import configparser
import json
import os
import pathlib
import shlex
import subprocess
import sys

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
RENDER = """
import json, pathlib, sys
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar, trust_as_template

init_plugin_loader()
repo, settings, template = pathlib.Path(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
play = yaml.safe_load((repo / "playbooks/watch_timer.yml").read_text())[0]
variables = {name: trust_as_template(value) if isinstance(value, str) else value for name, value in play["vars"].items()}
variables.update(settings)
templar = Templar(loader=DataLoader(), variables=variables)
print(templar.template(trust_as_template(template)), end="")
"""


def _rendered(started_in, template, **settings):
    """`template` under the playbook's vars, for a run of watch_timer.yml started in `started_in` (its shell's PWD)."""
    settings = {
        "playbook_dir": str(REPO / "playbooks"), "ansible_playbook_python": "/opt/ansible/bin/python3", "ansible_managed": "Ansible managed",
        "watch_timer_inventory": "/srv/cluster/inventory/hosts.yml", **settings,
    }  # fmt: skip
    env = {**os.environ, "PWD": started_in}
    done = subprocess.run(
        [sys.executable, "-c", RENDER, str(REPO), json.dumps(settings), template], env=env, capture_output=True, text=True, timeout=600, check=False
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _service(started_in, **settings):
    unit = configparser.ConfigParser(interpolation=None, strict=False)
    unit.optionxform = str
    unit.read_string(_rendered(started_in, (REPO / "playbooks/templates/sparkfleet-watch.service.j2").read_text(), **settings))
    return unit["Service"]


def test_the_service_runs_where_the_timer_was_installed_so_a_relaunchs_reports_land_beside_a_manual_runs():
    service = _service("/srv/cluster")
    # systemd sets no PWD: without both, engine_report_dir ("$PWD/reports") would be /reports.
    assert service["WorkingDirectory"] == "/srv/cluster"
    assert service["Environment"] == '"PWD=/srv/cluster"'
    assert shlex.split(service["ExecStart"]) == ["/opt/ansible/bin/ansible-playbook", "-i", "/srv/cluster/inventory/hosts.yml", f"{REPO}/playbooks/watch.yml"]
    engine_defaults = yaml.safe_load((REPO / "roles/engine/defaults/main.yml").read_text())
    assert _rendered("/srv/cluster", engine_defaults["engine_report_dir"]) == "/srv/cluster/reports"  # PWD as the service sets it


@pytest.mark.parametrize(
    ("started_in", "working_directory"),
    [("/home/nvidia/100%", "/home/nvidia/100%%"), ("/home/nvidia/my cluster", "/home/nvidia/my cluster")],
    ids=["a percent sign (a systemd specifier)", "a space"],
)
def test_a_working_directory_systemd_would_misread_is_escaped(started_in, working_directory):
    service = _service(started_in)
    assert service["WorkingDirectory"] == working_directory
    assert service["Environment"] == f'"PWD={working_directory}"'


def test_a_relative_working_directory_is_refused_naming_it_and_the_fix_before_any_unit_is_written(tmp_path):
    """The real playbook, refused at its first task (become off: nothing here needs root before it)."""
    run = subprocess.run(
        [str(pathlib.Path(sys.executable).with_name("ansible-playbook")), str(REPO / "playbooks/watch_timer.yml"),
         "-e", f"watch_timer_inventory={tmp_path}/hosts.yml", "-e", "watch_timer_working_dir=cluster", "-e", "ansible_become=false"],
        cwd=tmp_path, env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert run.returncode != 0
    assert "absolute watch_timer_working_dir (got 'cluster'; -e watch_timer_working_dir=$PWD)" in run.stdout, run.stdout[-3000:]
    assert "Write the service and the timer" not in run.stdout
