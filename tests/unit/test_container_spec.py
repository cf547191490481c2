"""A profile's container settings in Docker's two spellings (module_utils/container_spec.py)."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import pytest
import yaml

from ansible_collections.sparkfleet.vllm.plugins.module_utils import container_spec as spec

PROFILES = yaml.safe_load((pathlib.Path(__file__).resolve().parents[2] / "playbooks/group_vars/all/profiles.yml").read_text())["profiles"]


def test_the_gb10_profile_becomes_the_cli_options_the_recipe_runs_with():
    """recipe.md: --gpus all --ulimit memlock=-1:-1 --device /dev/infiniband --shm-size 10gb."""
    gb10 = PROFILES["gb10"]
    assert spec.docker_run_options(gb10["gpus"], gb10["devices"], gb10["ulimits"], gb10["shm_size"]) == [
        "--gpus=all", "--device=/dev/infiniband", "--ulimit=memlock=-1:-1", "--shm-size=10g",
    ]  # fmt: skip


def test_the_cpu_profile_needs_no_gpu_device_or_ulimit():
    cpu = PROFILES["cpu"]
    assert spec.docker_run_options(cpu["gpus"], cpu.get("devices"), cpu.get("ulimits"), None) == []


@pytest.mark.parametrize(
    ("written", "cli", "module"),
    [
        ("memlock:-1:-1", "memlock=-1:-1", "memlock:-1:-1"),
        ("memlock=-1:-1", "memlock=-1:-1", "memlock:-1:-1"),
        ("nofile:65536", "nofile=65536:65536", "nofile:65536:65536"),
    ],
)
def test_either_spelling_becomes_each_tools_own(written, cli, module):
    assert spec.ulimit_cli(written) == cli
    assert spec.ulimit_module(written) == module


@pytest.mark.parametrize("bad", ["memlock", "memlock:unlimited", "mem-lock:-1:-1", "heap:1:1", "memlock:-1:-1:-1"])
def test_a_ulimit_docker_would_refuse_is_refused_naming_it(bad):
    with pytest.raises(spec.ContainerSpecError, match=rf"^ulimit '{bad}' is not NAME:SOFT:HARD with a name Docker knows .*write it like memlock:-1:-1"):
        spec.ulimit_cli(bad)


def test_a_device_outside_dev_is_refused():
    with pytest.raises(spec.ContainerSpecError, match=r"^device 'infiniband' is not a path under /dev"):
        spec.docker_run_options(devices=["infiniband"])


@pytest.mark.skipif(shutil.which("docker") is None, reason="no Docker CLI")
def test_the_real_docker_cli_parses_what_preflight_gives_it_and_refuses_the_module_spelling(tmp_path):
    """The Docker CLI parses its flags before it reaches any engine: pointed at no engine, the gb10 options get
    as far as the connection, and the community.docker spelling is refused as the all-reduce once was."""
    gb10 = PROFILES["gb10"]
    env = dict(os.environ, DOCKER_HOST=f"unix://{tmp_path}/no-engine.sock", DOCKER_CONFIG=str(tmp_path))

    def create(options):
        return subprocess.run(["docker", "create", *options, "sparkfleet/none"], env=env, capture_output=True, text=True, timeout=60, check=False)

    refused = create(["--ulimit=memlock:-1:-1"])
    assert refused.returncode != 0
    assert 'invalid argument "memlock:-1:-1" for "--ulimit" flag' in refused.stderr
    parsed = create(spec.docker_run_options(gb10["gpus"], gb10["devices"], gb10["ulimits"], gb10["shm_size"]))
    assert parsed.returncode != 0
    assert "invalid argument" not in parsed.stderr, parsed.stderr  # it failed only for want of an engine


# What Docker 28's CLI printed here for each cause (Docker 20.10's socket refusal: "unknown server OS").
REFUSED = {
    "socket": (
        "docker: permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock:"
        ' Head "http://%2Fvar%2Frun%2Fdocker.sock/_ping": dial unix /var/run/docker.sock: connect: permission denied'
    ),
    "old socket": "docker: unknown server OS: .",
    "daemon": "docker: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
    "gpu": 'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]]',
    "device": 'docker: Error response from daemon: error gathering device information while adding custom device "/dev/infiniband": no such file or directory',
    "ulimit": 'invalid argument "memlock:-1:-1" for "--ulimit" flag: invalid ulimit argument: memlock:-1:-1',
    "rlimit": (
        "docker: Error response from daemon: failed to create shim task: OCI runtime create failed: runc create failed: unable to"
        " start container process: error during container init: error setting rlimits for ready process: error setting rlimit"
        " type 8: operation not permitted: unknown"
    ),
    "image": "docker: Error response from daemon: No such image: registry:5000/vllm-sm121:1",
}  # fmt: skip


@pytest.mark.parametrize(
    ("cause", "says"),
    [
        ("socket", "spark3's Docker socket refused the deploy user: the checks reach it through sudo (become)"),
        ("old socket", "spark3's Docker socket refused the deploy user"),
        ("daemon", "Docker is not running on spark3: start it (sudo systemctl start docker"),
        ("gpu", "Docker on spark3 has no GPU driver registered (profiles[gb10].gpus): install the NVIDIA Container Toolkit"),
        ("device", "/dev/infiniband is missing on spark3 (profiles[gb10].devices): check that the devices exist (ls /dev/infiniband;"),
        ("ulimit", "Docker on spark3 refused a ulimit of profiles[gb10].ulimits"),
        ("rlimit", "Docker on spark3 refused a ulimit of profiles[gb10].ulimits"),
        ("image", "spark3 does not hold the engine image (checks never pull it): run playbooks/artifacts.yml"),
    ],
)
def test_a_refusal_says_what_docker_refused_and_the_fix(cause, says):
    fix = spec.docker_refusal_fix(REFUSED[cause], "spark3", "gb10")
    assert fix.startswith(says), fix
    assert not fix.endswith(".")


def test_a_socket_refusal_never_blames_the_profile_and_an_unknown_one_does():
    assert "profiles[" not in spec.docker_refusal_fix(REFUSED["socket"], "spark3", "gb10")
    assert spec.docker_refusal_fix("docker: Error response from daemon: something new", "spark3", "gb10").startswith(
        "The profile's gpus, devices or ulimits (profiles[gb10]) are what the engine's ranks get too"
    )
