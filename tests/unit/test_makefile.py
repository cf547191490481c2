"""The Makefile's own behaviour: what `make -n` runs, and the floors each goal checks the host against.

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
    # host-check's stub also says which option and floors it was given.
    (tmp_path / SCRIPTS[1]).write_text(f'#!/bin/sh\necho "host-check.sh${{1:+ $1}} disk=$SIM_MIN_DISK_GB memory=$SIM_MIN_MEM_GB" >> {ran}\n')
    # Only PATH and HOME: under `make unit` this process inherits make's own variables (MAKEFLAGS, and HOST_CHECKED=1
    # from `make test`'s sub-make), which would change what the Makefile under test does.
    env = {"PATH": f"{stubs}:{os.environ['PATH']}", "HOME": str(tmp_path)}
    return tmp_path, env, ran


def _up_to_date(directory):
    """The venv, the wheels and the collection link as a set-up checkout has them: only the goals' own recipes run."""
    for made in (".venv/.installed", "images/engine-cpu/wheels/.complete", ".venv/.vllm-installed", "collections/ansible_collections/sparkfleet/vllm/.keep"):
        (directory / made).parent.mkdir(parents=True, exist_ok=True)
        (directory / made).touch()


@pytest.mark.parametrize(
    ("goal", "shown"),
    [
        # integration runs beside verify, after the rehearsal: a sub-make that make -n prints and does not run.
        ("test", ["molecule converge", "molecule verify", "for target in rehearsal integration;", "molecule destroy"]),
        ("demo", ["sim_up.yml", "site.yml -e lane=500k"]),
    ],
)  # fmt: skip
def test_a_dry_run_prints_the_cluster_recipes_and_runs_none(scratch, goal, shown):
    directory, env, ran = scratch
    result = subprocess.run(["make", "-n", goal], cwd=directory, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    for line in shown:
        assert line in result.stdout, result.stdout[-3000:]
    assert not ran.exists(), f"make -n {goal} ran: {ran.read_text()}"


@pytest.mark.parametrize(
    ("goal", "own", "floors"),
    [
        ("test", {}, "disk=48 memory=16"), ("test", {"SIM_MIN_DISK_GB": "20"}, "disk=20 memory=16"), ("demo-setup", {}, "disk= memory="),
        ("unit", {}, "--tools disk= memory="), ("checks", {}, "--tools disk= memory="),
    ],
)  # fmt: skip
def test_make_test_checks_the_host_for_two_clusters_and_a_users_floor_wins(scratch, goal, own, floors):
    """`make test` brings up two clusters at once: host-check gets its floors (48 GB, 16 GB); `make demo` gets
    host-check's own (30, 14); a floor the user sets wins over both. `make unit` and `make checks` bring up no
    cluster: host-check --tools only installs what their tests run (no floor, no Docker engine)."""
    directory, env, ran = scratch
    _up_to_date(directory)
    result = subprocess.run(["make", goal], cwd=directory, env={**env, **own}, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    checks = [line for line in ran.read_text().splitlines() if line.startswith("host-check.sh")]
    assert checks == [f"host-check.sh {floors}"], ran.read_text()


def test_a_python_other_than_3_11_is_refused_before_the_venv_or_the_download_naming_it_and_the_fix(scratch):
    """The venv and the cpu engine image take the same pinned cp311 wheels: `make` with a Python 3.12 (Ubuntu
    24.04's) would download wheels the image cannot install. Refused before anything is made."""
    directory, env, _unused = scratch
    newer = directory / "python3.12"
    newer.write_text('#!/bin/sh\ncase "$1" in --version) echo "Python 3.12.3";; *) exit 1;; esac\n')
    newer.chmod(0o755)
    for goal in (".venv/.installed", "images/engine-cpu/wheels/.complete"):
        result = subprocess.run(["make", f"PYTHON={newer}", goal], cwd=directory, env=env, capture_output=True, text=True, timeout=120, check=False)
        assert result.returncode != 0, goal
        assert result.stderr.startswith(f"make: PYTHON={newer} is Python 3.12.3, not Python 3.11: "), result.stderr
        assert "run make PYTHON=/path/to/python3.11" in result.stderr
    assert not (directory / ".venv").exists()
    assert not (directory / "images/engine-cpu/wheels").exists()


def test_python_3_11_on_path_is_the_default_else_python3(scratch):
    """Ubuntu 24.04's python3 is 3.12: a python3.11 beside it is the one `make` takes."""
    directory, env, _unused = scratch
    result = subprocess.run(["make", "-p", "-n", "help"], cwd=directory, env=env, capture_output=True, text=True, timeout=120, check=False)
    chosen = next(line.split(":= ", 1)[1] for line in result.stdout.splitlines() if line.startswith("PYTHON :="))
    assert chosen == (shutil.which("python3.11", path=env["PATH"]) or "python3"), chosen
    (directory / "stubs/python3.11").write_text("#!/bin/sh\nexit 0\n")
    (directory / "stubs/python3.11").chmod(0o755)
    result = subprocess.run(["make", "-p", "-n", "help"], cwd=directory, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert f"PYTHON := {directory / 'stubs/python3.11'}" in result.stdout.splitlines()
