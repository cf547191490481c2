"""`make -n` shows what `make test` and `make demo` would do, and does none of it.

GNU make runs, even under -n, every recipe line that names $(MAKE), so that the sub-make can print its own
recipes. The demo and molecule recipes start sub-makes on lines that also bring a cluster up, converge it and
tear it down: those lines name SUBMAKE instead. The Makefile runs here in a scratch copy whose tools are stubs
that log their calls, so a regression runs nothing real.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
# What the recipes of `make test` and `make demo` call, by name or by path.
COMMANDS = ("molecule", "ansible-playbook", "pytest", "docker", "ruff", "ansible-lint", "antsibull-changelog")
SCRIPTS = ("molecule/resources/at_cpu_weight.sh", "molecule/resources/host-check.sh", "tests/sanity/run.sh")


@pytest.fixture
def scratch(tmp_path):
    """The Makefile and the files its rules depend on, with every tool it calls a stub appending to ran.log."""
    shutil.copy(REPO / "Makefile", tmp_path / "Makefile")
    for needed in ("requirements.txt", "images/engine-cpu-wheels.txt"):
        (tmp_path / needed).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / needed, tmp_path / needed)
    ran, stubs = tmp_path / "ran.log", tmp_path / "stubs"
    stubs.mkdir()
    for stub in [stubs / name for name in COMMANDS] + [tmp_path / path for path in SCRIPTS]:
        stub.parent.mkdir(parents=True, exist_ok=True)
        stub.write_text(f'#!/bin/sh\necho "{stub.name} $*" >> {ran}\n')
        stub.chmod(0o755)
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "HOME": str(tmp_path)}
    env.pop("MAKEFLAGS", None)
    return tmp_path, env, ran


@pytest.mark.parametrize(
    ("goal", "shown"),
    [("test", ["pytest -q tests/integration", "molecule converge", "molecule verify", "molecule destroy"]), ("demo", ["sim_up.yml", "site.yml -e lane=500k"])],
)  # fmt: skip
def test_a_dry_run_prints_the_cluster_recipes_and_runs_none(scratch, goal, shown):
    directory, env, ran = scratch
    result = subprocess.run(["make", "-n", goal], cwd=directory, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    for line in shown:
        assert line in result.stdout, result.stdout[-3000:]
    assert not ran.exists(), f"make -n {goal} ran: {ran.read_text()}"
