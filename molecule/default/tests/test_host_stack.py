"""Verify the host stack on the simulated cluster: driver, container toolkit, NCCL, memory hygiene.

The packages are the simulation's stand-ins (molecule/resources/images/nvidia-repo:
NVIDIA's names and versions in a signed flat repository); apt and dpkg on the
nodes are real, so pins, holds, downgrades and refusals are real. nvidia-smi
and the reboot are test doubles (molecule/resources/doubles).

Per node (testinfra): what converge left. Then, from the controller, runs of
playbooks/host.yml with bad input, each failing before any node changes
(compared with a snapshot of every node's package and configuration state),
and with drift, which a re-run heals.
"""

from __future__ import annotations

import concurrent.futures
import os
import pathlib
import re
import subprocess

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[3]
INVENTORY = REPO / "molecule/resources/inventory/hosts.yml"
NODES = ("spark1", "spark2", "spark3", "spark4")
# NVIDIA's version strings, as the stand-in repository publishes them: the pin (nccl_version 2.30.7-1) resolves
# to its CUDA 13 build; the decoys are an older release, a newer one, and the same release built for CUDA 12.
NCCL = "2.30.7-1+cuda13.3"
DECOY = "2.29.7-1+cuda13.0"
NEWER = "2.31.2-1+cuda13.3"
DRIVER = "580.95.05"
SMI = "/opt/sparkfleet-sim/bin/nvidia-smi"


def _sh(node, command):
    return subprocess.run(["docker", "exec", node, "sh", "-c", command], capture_output=True, text=True, check=True).stdout


def _snapshot():
    """Everything the host roles may change on every node, hashed: packages, selections, apt, Docker, sysctl, NCCL."""
    command = (
        "dpkg-query -W -f '${Package} ${Version} ${Status}\\n' | sha256sum; apt-mark showhold;"
        " find /etc/apt /etc/docker /etc/sysctl.d /etc/nccl.conf /opt/sparkfleet -type f -exec sha256sum {} + 2>/dev/null | sort;"
        " cat /var/lib/sparkfleet-sim/loaded-driver /var/lib/sparkfleet-sim/boot-id; cat /proc/sys/vm/swappiness"
    )
    return {node: _sh(node, command) for node in NODES}


def _run(playbook, *extra):
    """(return code, folded stdout, changed per node) of a playbook against the four nodes."""
    rc, stdout, _unused = _run_raw(playbook, *extra)
    recap = dict(re.findall(r"^(spark\d)\s+:\s+ok=\d+\s+changed=(\d+)", stdout, re.M))
    return rc, " ".join(stdout.split()), {node: int(count) for node, count in recap.items()}


def _run_raw(playbook, *extra):
    """(return code, stdout, stderr) of a playbook against the four nodes."""
    env = {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_NOCOLOR": "1"}
    result = subprocess.run(
        ["ansible-playbook", "-i", str(INVENTORY), str(REPO / playbook), *extra],
        cwd=REPO, env=dict(os.environ, **env), capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    return result.returncode, result.stdout, result.stderr


def _host_playbook(*extra):
    return _run("playbooks/host.yml", *extra)


def _own_lock(name):
    """Runs at once on one cluster are refused by its run lock, by design (test_default's cases): each run these
    tests start side by side keeps its own lock record."""
    return ("-e", f"cluster_run_lock_path=/var/lib/sparkfleet/test-locks/{name}.lock")


# What converge left, on every node.


def test_the_first_run_began_as_a_stock_user_outside_the_docker_group_and_left_it_in(host):
    """A stock DGX OS user is not in the docker group (NVIDIA's Spark guide adds it by hand). The node image's user
    is not either: converge's preflight reached Docker through sudo, and the host role added the user after it."""
    image = subprocess.run(
        ["docker", "run", "--rm", "--entrypoint", "id", "sparkfleet-sim/node:latest", "-nG", "nvidia"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert "docker" not in image, image
    assert "docker" in host.check_output("id -nG nvidia").split()


def test_pinned_stand_in_packages_are_installed(host):
    for package, version in (("libnccl2", NCCL), ("libnccl-dev", NCCL), ("nvidia-open", DRIVER + "-1"), ("nvidia-container-toolkit", "1.18.0-1")):
        installed = host.package(package)
        assert installed.is_installed, f"{package} missing"
        assert installed.version == version, f"{package} {installed.version}"


def test_nccl_is_held_and_pinned_above_the_decoys(host):
    held = host.check_output("apt-mark showhold").split()
    assert {"libnccl2", "libnccl-dev"} <= set(held), held
    policy = host.check_output("LC_ALL=C apt-cache policy libnccl2")
    assert f"Candidate: {NCCL}" in policy, policy
    assert re.search(rf"\*\*\* {re.escape(NCCL)} 1001", policy), policy
    # Both decoys are there to be chosen, and are not.
    assert DECOY in policy, policy
    assert NEWER in policy, policy


def test_driver_is_loaded_and_docker_has_the_nvidia_runtime(host):
    table = host.check_output(SMI)
    assert f"Driver Version: {DRIVER}" in table
    assert "Not Supported" in table  # the GB10 recording: memory is unified
    runtimes = host.check_output("sudo docker info --format '{{json .Runtimes}}'")
    assert '"nvidia"' in runtimes


def test_nccl_conf_holds_the_clusters_settings(host):
    conf = host.file("/etc/nccl.conf").content_string
    group_vars = yaml.safe_load((REPO / "playbooks/group_vars/all/nccl.yml").read_text())
    for key, value in group_vars["nccl_settings"].items():
        assert f"\n{key}={value}\n" in conf, key
    assert "\nNCCL_SOCKET_IFNAME=eth0\n" in conf  # the simulation's fabric interface
    assert "NCCL_IB_GID_INDEX=" not in conf  # auto: NCCL chooses


def test_the_gpu_clocks_are_locked_now_and_by_a_unit_enabled_for_every_boot(host):
    unit = host.file("/etc/systemd/system/sparkfleet-gpu-clocks.service")
    assert f"ExecStart={SMI} -lgc 200,2000" in unit.content_string
    assert "Type=oneshot" in unit.content_string
    link = host.file("/etc/systemd/system/multi-user.target.wants/sparkfleet-gpu-clocks.service")
    assert link.is_symlink
    assert link.linked_to == "/etc/systemd/system/sparkfleet-gpu-clocks.service"
    assert host.file("/var/lib/sparkfleet-sim/locked-clocks").content_string.strip() == "200,2000"  # what the GPU double was told


def test_swappiness_is_zero_now_and_persisted(host):
    assert host.file("/proc/sys/vm/swappiness").content_string.strip() == "0"
    assert host.file("/etc/sysctl.d/60-sparkfleet.conf").content_string.strip() == "vm.swappiness=0"


def test_swap_state_is_the_kernels(host):
    """Nodes share the machine's kernel: they see its swap (CI enables some, see .ci/run)."""
    # Name, type, size and priority: the used column moves between two reads of a live kernel.
    kernel_swaps = [line.split()[:3] + line.split()[4:] for line in pathlib.Path("/proc/swaps").read_text().splitlines()[1:]]
    node_swaps = [line.split()[:3] + line.split()[4:] for line in host.file("/proc/swaps").content_string.splitlines()[1:]]
    assert node_swaps == kernel_swaps
    if kernel_swaps:
        assert int(host.check_output("awk '/SwapTotal/ {print $2}' /proc/meminfo")) > 0


# Bad input and drift, from the controller.


def test_decoy_nccl_on_one_node_is_reported_refused_where_the_engine_loads_it_and_replaced_when_asked():
    """spark3 holds another libnccl2. The engine loads its image's NCCL: reported, spark3 left as it is. Where the
    host's NCCL is made the engine's: the nccl role refuses it, and the engine refuses ranks on different libraries.
    Asked to, the pin replaces it."""
    _sh(
        "spark3",
        f"apt-mark unhold libnccl2 libnccl-dev >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -qq -y"
        f" --allow-downgrades libnccl2={DECOY} libnccl-dev={DECOY} >/dev/null && apt-mark hold libnccl2 libnccl-dev >/dev/null",
    )
    # Three runs that only read, at once: the default (reported), the host's NCCL made the engine's (refused
    # by the nccl role), and the engine's own check of the libraries its ranks would load (refused by lane.yml).
    before = _snapshot()
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        default = pool.submit(_host_playbook, *_own_lock("default"))
        for_engine = pool.submit(_host_playbook, "-e", "nccl_host_library_for_engine=true", *_own_lock("for-engine"))
        lane = pool.submit(_run, "playbooks/lane.yml", "-e", "engine_nccl_host_library=true", *_own_lock("lane"))
    assert _snapshot() == before

    rc, out, changed = default.result()
    assert rc == 0, out[-3000:]
    assert f"spark3: libnccl2 {DECOY} (held), libnccl-dev {DECOY} (held) on the host, not the pinned {NCCL}: left as it is." in out, out[-3000:]
    assert set(changed.values()) == {0}, changed

    rc, out, _unused = for_engine.result()
    assert rc != 0
    assert f"spark3: libnccl2 {DECOY} is installed and held, not the pinned {NCCL}, and the engine loads the host" in out, out[-3000:]
    assert "(nccl_host_library_for_engine). Nothing was changed on spark3. Replace it with the pinned version (run again with -e nccl_replace" in out

    # The engine's own check, on real dpkg: the ranks would load different libnccl.so.2 bytes.
    rc, folded, _unused = lane.result()
    assert rc != 0
    # The YAML callback may double the quotes around the engine's name.
    assert re.search(r"The host NCCL libraries of engine '+sparks'+ differ \(sha256 per node:", folded), folded[-3000:]
    assert "Start the workers (headless) first" not in folded

    rc, out, changed = _host_playbook("-e", "nccl_replace_installed=true")
    assert rc == 0, out[-3000:]
    assert changed["spark3"] > 0, changed
    assert changed["spark1"] == 0, changed
    assert _sh("spark3", "dpkg-query -W -f '${Version}' libnccl2") == NCCL
    assert set(_sh("spark3", "apt-mark showhold").split()) >= {"libnccl2", "libnccl-dev"}


def test_driver_drift_on_one_node_is_healed_by_a_rerun():
    """spark4 comes back from a reboot with a newer driver loaded. By default no node is downgraded: the
    others would be brought up to it (refused here, installs forbidden). Asked to, the pinned one is loaded again."""
    _sh("spark4", "echo 580.126.09 > /var/lib/sparkfleet-sim/loaded-driver")
    before = _snapshot()
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:  # both only read before they refuse
        forbidden = pool.submit(_host_playbook, "-e", "nvidia_driver_install=false", *_own_lock("forbidden"))
        no_reboot = pool.submit(_host_playbook, "-e", "nvidia_driver_allow_downgrade=true", "-e", "nvidia_driver_reboot=false", *_own_lock("no-reboot"))
    assert _snapshot() == before
    rc, out, _unused = forbidden.result()
    assert rc != 0
    drift = "drivers differ across the nodes (spark1 580.95.05, spark2 580.95.05, spark3 580.95.05, spark4 580.126.09)"
    for node in ("spark1", "spark2", "spark3"):
        assert f"{node}: {drift}; up to 580.126.09, and installs are forbidden (nvidia_driver_install: false)" in out, out[-3000:]
    assert "spark4: drivers differ" not in out  # never downgraded unless the inventory asks
    # Downgrades allowed, reboots not: the package is already the pinned one, the loaded driver is not.
    rc, out, _unused = no_reboot.result()
    assert rc != 0
    assert (
        "spark4 has driver 580.95.05 installed but 580.126.09 loaded, and reboots are forbidden (nvidia_driver_reboot: false)."
        " Reboot spark4 (sudo reboot), one node at a time, then run again."
    ) in out, out[-3000:]
    booted = _sh("spark4", "cat /var/lib/sparkfleet-sim/boot-id")
    rc, out, changed = _host_playbook("-e", "nvidia_driver_allow_downgrade=true")
    assert rc == 0, out[-3000:]
    assert changed["spark4"] > 0, changed
    assert changed["spark2"] == 0, changed
    assert f"Driver Version: {DRIVER}" in _sh("spark4", SMI)
    # The reboot lost the GPU's locked clocks; the unit enabled for every boot set them again (the role did not:
    # its unit was unchanged).
    assert _sh("spark4", "cat /var/lib/sparkfleet-sim/boot-id") != booted
    assert _sh("spark4", "cat /var/lib/sparkfleet-sim/locked-clocks").strip() == "200,2000"
    locked_by_the_role = re.search(r"Lock the GPU's clocks now \(nvidia-smi -lgc\)\][^\n]*\n(.*?)(\nTASK \[|\Z)", out, re.S)
    assert locked_by_the_role is None or "changed" not in locked_by_the_role.group(1), locked_by_the_role.group(1)


BAD_INPUT = {
    "driver below the minimum, installs forbidden": (
        ["-e", "nvidia_driver_min_version=580.126", "-e", "nvidia_driver_version=580.126.09", "-e", "nvidia_driver_install=false"],
        "spark1: driver 580.95.05 is below the minimum 580.126, and installs are forbidden (nvidia_driver_install: false).",
    ),
    # Where the ranks load the host's NCCL; otherwise another version is only reported (the decoy test).
    "an NCCL version other than the pinned one, the host's NCCL the engine's": (
        ["-e", "nccl_version=2.29.7-1", "-e", "nccl_host_library_for_engine=true"],
        f"spark2: libnccl2 {NCCL} is installed and held, not the pinned 2.29.7-1+cuda13.0, and the engine loads the host",
    ),
    # The pin this collection once shipped: a version string NVIDIA never published.
    "an NCCL build the repository does not publish": (
        ["-e", "nccl_version=2.30.7-1+cuda13.0"],
        "spark3: NCCL 2.30.7-1+cuda13.0 has no build for CUDA 13 in the repository (it has 2.30.7-1+cuda13.3, 2.30.7-1+cuda12.9)",
    ),
    "an unreachable repository": (
        ["-e", "cuda_repo_base_url=http://192.168.100.5/no/such/repos"],
        "spark3 cannot reach the CUDA repository http://192.168.100.5/no/such/repos/debian12/x86_64/",
    ),
    "an unsupported architecture": (
        ["-e", '{"host_supported_architectures": ["aarch64"]}'],
        "supported: DGX OS / Ubuntu 24.04 and Debian 12 on aarch64. Nothing was changed on spark4.",
    ),
}


@pytest.fixture(scope="module")
def bad_input_runs():
    """Every case, three at a time (each only reads before it fails), between two snapshots of the nodes."""
    before = _snapshot()
    cases = dict(enumerate(BAD_INPUT))
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        outcomes = pool.map(lambda index: _run_raw("playbooks/host.yml", *BAD_INPUT[cases[index]][0], *_own_lock(f"bad-input-{index}")), cases)
        runs = dict(zip(BAD_INPUT, outcomes, strict=True))
    return before, runs, _snapshot()


@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_bad_input_fails_naming_the_node_before_any_change(bad_input_runs, case):
    before, runs, after = bad_input_runs
    rc, stdout, stderr = runs[case]
    out = " ".join(stdout.split())
    assert rc != 0
    assert BAD_INPUT[case][1] in out, out[-3000:]
    # The first error line is our sentence, naming a node, after Ansible's fixed prefix.
    first = next(line for line in (stdout + stderr).splitlines() if line.startswith(("[ERROR]", "fatal:")))
    assert re.match(r"\[ERROR\]: Task failed: (Action|Module) failed: spark\d", first), first
    assert after == before
