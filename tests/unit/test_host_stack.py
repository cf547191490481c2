"""The host stack's decisions: the cluster's driver plan, NCCL's refusals, /etc/nccl.conf,
and gpu_driver_info run as Ansible runs it on the recorded nvidia-smi tables."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import dpkg, nccl_pin, nvidia_driver
from ansible_collections.sparkfleet.vllm.plugins.module_utils import nvidia_smi as smi

REPO = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests/data/gpu"
DOUBLE = REPO / "tests/doubles/nvidia_smi_double.py"
MODULE = REPO / "plugins/modules/gpu_driver_info.py"
PIN = "2.30.7-1+cuda13.0"
PACKAGES = ["libnccl2", "libnccl-dev"]
NO_DRIVER = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n"


# Reading the driver from both recorded machines, in both forms.


def test_loaded_driver_from_the_gb10_table_keeps_memory_unreported():
    found = nvidia_driver.loaded_driver(0, (FIXTURES / "gb10/nvidia-smi.txt").read_text(), "")
    assert found["state"] == "loaded"
    assert (found["version"], found["cuda_version"]) == ("580.126.09", "13.0")
    assert found["gpus"] == [{"index": 0, "name": "NVIDIA GB10", "memory_used": None, "memory_total": None}]


def test_loaded_driver_from_the_h200_table():
    found = nvidia_driver.loaded_driver(0, (FIXTURES / "h200-x2/nvidia-smi.txt").read_text(), "")
    assert found["version"] == "580.159.04"
    assert [gpu["memory_total"] for gpu in found["gpus"]] == [143771 * 1024 * 1024] * 2


def test_the_csv_form_reads_the_same_driver_as_the_table():
    rows = smi.parse_query_csv((FIXTURES / "h200-x2/query-gpu.csv").read_text())
    table = nvidia_driver.loaded_driver(0, (FIXTURES / "h200-x2/nvidia-smi.txt").read_text(), "")
    assert {row["driver_version"] for row in rows} == {table["version"]}


@pytest.mark.parametrize(
    ("rc", "out", "state"),
    [(9, NO_DRIVER, "not_loaded"), (18, "Failed to initialize NVML: Driver/library version mismatch\n", "not_loaded"), (0, NO_DRIVER, "not_loaded")],
)
def test_no_driver_answering_is_a_state_not_an_error(rc, out, state):
    found = nvidia_driver.loaded_driver(rc, out, "")
    assert found["state"] == state
    assert found["version"] is None
    assert found["detail"].startswith(out.splitlines()[0][:40])


def test_absent_nvidia_smi():
    assert nvidia_driver.loaded_driver(None, "", "", found=False)["state"] == "absent"


@pytest.mark.parametrize(("package", "upstream"), [("580.95.05-1", "580.95.05"), ("1:580.95.05-0ubuntu1", "580.95.05"), ("580.95.05", "580.95.05")])
def test_upstream_version(package, upstream):
    assert nvidia_driver.upstream_version(package) == upstream


# The cluster's plan.


def test_a_healthy_cluster_needs_nothing():
    plan = nvidia_driver.plan({"s1": "580.126.09", "s2": "580.126.09"}, "580.95", "580.95.05")
    assert plan == {"install": {}, "version": "580.126.09", "problems": []}  # newer than the pin but equal everywhere: kept


def test_missing_and_old_drivers_get_the_pin():
    plan = nvidia_driver.plan({"s1": None, "s2": "570.86.15", "s3": "580.95.05"}, "580.95", "580.95.05")
    assert plan["install"] == {"s1": "no driver answers", "s2": "driver 570.86.15 is below the minimum 580.95"}
    assert plan["problems"] == []


REPOSITORY = ["580.95.05", "580.126.09"]  # what the stand-in repository (and NVIDIA's) offers


def test_mixed_drivers_converge_up_never_down_by_default():
    # The recipe's real case: three nodes updated to 580.126.09, one left on 580.95.05 (the pin).
    loaded = {"s1": "580.126.09", "s2": "580.126.09", "s3": "580.126.09", "s4": "580.95.05"}
    plan = nvidia_driver.plan(loaded, "580.95", "580.95.05", available=REPOSITORY)
    assert plan["version"] == "580.126.09"
    assert plan["install"] == {"s4": "drivers differ across the nodes (s1 580.126.09, s2 580.126.09, s3 580.126.09, s4 580.95.05); up to 580.126.09"}
    assert plan["problems"] == []  # one upgrade, one reboot; not three downgrades and three reboots


def test_mixed_drivers_stop_with_the_table_when_the_newer_one_is_not_offered():
    loaded = {"s1": "580.95.05", "s2": "580.95.05", "s3": "580.126.09"}
    for available in (None, ["580.95.05"]):
        plan = nvidia_driver.plan(loaded, "580.95", "580.95.05", available=available)
        (problem,) = plan["problems"]
        assert "The nodes run s1 580.95.05, s2 580.95.05, s3 580.126.09; the newest, 580.126.09, is above the pinned 580.95.05" in problem
        assert "no node is downgraded by default" in problem
        assert "nvidia_driver_allow_downgrade: true" in problem


def test_downgrades_only_when_the_inventory_asks():
    plan = nvidia_driver.plan({"s1": "580.95.05", "s2": "580.95.05", "s3": "580.126.09"}, "580.95", "580.95.05", allow_downgrade=True)
    assert plan["version"] == "580.95.05"
    assert plan["install"] == {"s3": "drivers differ across the nodes (s1 580.95.05, s2 580.95.05, s3 580.126.09); down to the pinned 580.95.05"}
    assert plan["problems"] == []


def test_a_new_node_gets_the_version_the_cluster_runs():
    plan = nvidia_driver.plan({"s1": "580.126.09", "s2": None}, "580.95", "580.95.05", available=REPOSITORY)
    assert plan["install"] == {"s2": "no driver answers"}
    assert plan["version"] == "580.126.09"


def test_available_versions_are_what_every_nodes_repository_offers():
    madison = (
        " nvidia-open | 580.126.09-1 | http://192.168.100.5/repos/debian12/x86_64  Packages\n"
        " nvidia-open |  580.95.05-1 | http://192.168.100.5/repos/debian12/x86_64  Packages\n"
    )
    assert nvidia_driver.available_versions([madison, madison]) == ["580.95.05", "580.126.09"]
    assert nvidia_driver.available_versions([madison, " nvidia-open | 580.95.05-1 | x Packages\n"]) == ["580.95.05"]


def test_versions_compare_numerically_not_as_text():
    # "580.95" < "580.126" as numbers; as text it would be the other way round.
    plan = nvidia_driver.plan({"s1": "580.95.05"}, "580.126", "580.126.09")
    assert plan["install"] == {"s1": "driver 580.95.05 is below the minimum 580.126"}


def test_forbidden_installs_become_problems_naming_each_node():
    plan = nvidia_driver.plan({"s1": None, "s2": "580.95.05"}, "580.95", "580.95.05", installs_allowed=False)
    assert plan["problems"] == [
        "s1: no driver answers, and installs are forbidden (nvidia_driver_install: false). "
        "Install driver 580.95.05 there (or allow the role to: nvidia_driver_install: true) and run again."
    ]


@pytest.mark.parametrize(
    ("minimum", "target", "message"),
    [("580.95", "570.1", "nvidia_driver_version 570.1 is below nvidia_driver_min_version 580.95"), ("latest", "580.95.05", "'latest' is not a driver version")],
)
def test_bad_driver_settings(minimum, target, message):
    with pytest.raises(nvidia_driver.DriverPolicyError, match=message):
        nvidia_driver.plan({"s1": None}, minimum, target)


# NCCL: what apt would do, and what is refused.

SIMULATION_FRESH = """NOTE: This is only a simulation!
Inst libnccl2 (2.30.7-1+cuda13.0 localhost [amd64])
Inst libnccl-dev (2.30.7-1+cuda13.0 localhost [amd64])
Conf libnccl2 (2.30.7-1+cuda13.0 localhost [amd64])
"""
SIMULATION_DOWNGRADE = """Inst libnccl-dev [2.31.2-1+cuda13.1] (2.30.7-1+cuda13.0 localhost [amd64])
Inst libnccl2 [2.31.2-1+cuda13.1] (2.30.7-1+cuda13.0 localhost [amd64])
"""
SIMULATION_MISSING = "E: Version '2.28.3-1+cuda12.9' for 'libnccl2' was not found\nE: Version '2.28.3-1+cuda12.9' for 'libnccl-dev' was not found\n"
SIMULATION_REMOVES = "Remv cuda-nccl-meta [1.0]\nInst libnccl2 (2.30.7-1+cuda13.0 localhost [amd64])\n"


def test_parse_apt_simulation():
    assert nccl_pin.parse_apt_simulation(SIMULATION_FRESH)["install"] == {"libnccl2": (None, PIN), "libnccl-dev": (None, PIN)}
    assert nccl_pin.parse_apt_simulation(SIMULATION_DOWNGRADE)["install"]["libnccl2"] == ("2.31.2-1+cuda13.1", PIN)
    assert len(nccl_pin.parse_apt_simulation(SIMULATION_MISSING)["missing"]) == 2
    assert nccl_pin.parse_apt_simulation(SIMULATION_REMOVES)["remove"] == ["cuda-nccl-meta"]


def _problems(installed, held=(), simulation=SIMULATION_FRESH, replace=False, host_library=True):
    return nccl_pin.problems("s2", PACKAGES, PIN, installed, list(held), simulation, replace, "http://repo/", host_library)


def test_a_fresh_node_and_the_pinned_version_are_fine():
    assert _problems({}) == []
    assert _problems({"libnccl2": [{"version": PIN}], "libnccl-dev": [{"version": PIN}]}, held=PACKAGES, simulation="") == []


def test_the_decoy_held_is_refused_with_the_documented_message():
    found = _problems({"libnccl2": [{"version": "2.29.7-1+cuda13.0"}]}, held=["libnccl2"], simulation=SIMULATION_DOWNGRADE)
    assert found == [
        "s2: libnccl2 2.29.7-1+cuda13.0 is installed and held, not the pinned 2.30.7-1+cuda13.0, and the engine loads the host's NCCL "
        "(nccl_host_library_for_engine). Nothing was changed on s2. "
        "Replace it with the pinned version (run again with -e nccl_replace_installed=true), "
        "or remove it (sudo apt-mark unhold libnccl2 libnccl-dev; sudo apt-get remove libnccl2 libnccl-dev) and run again."
    ]
    assert _problems({"libnccl2": "2.29.7-1+cuda13.0"}, held=["libnccl2"], simulation=SIMULATION_DOWNGRADE, replace=True) == []


def test_another_host_nccl_is_reported_and_left_alone_when_the_engine_uses_its_images():
    """The default: the engine loads the NCCL inside its image, so the host's other version is no problem."""
    decoy = {"libnccl2": [{"version": "2.29.7-1+cuda13.0"}], "libnccl-dev": [{"version": "2.29.7-1+cuda13.0"}]}
    assert _problems(decoy, held=["libnccl2"], simulation=SIMULATION_DOWNGRADE, host_library=False) == []
    report = nccl_pin.other_version_report("s2", PACKAGES, PIN, decoy, ["libnccl2"])
    assert report.startswith(
        "s2: libnccl2 2.29.7-1+cuda13.0 (held), libnccl-dev 2.29.7-1+cuda13.0 on the host, not the pinned 2.30.7-1+cuda13.0: left as it is."
    )
    assert "The engine loads the NCCL inside its image (checked on every node), not the host's." in report
    assert "-e nccl_replace_installed=true" in report
    assert "nccl_host_library_for_engine: true" in report
    assert nccl_pin.other_version_report("s2", PACKAGES, PIN, {"libnccl2": [{"version": PIN}]}, []) == ""
    # What apt says still counts where nothing else is installed: a fresh node installs the pin.
    assert _problems({}, simulation=SIMULATION_MISSING, host_library=False) != []


def test_a_version_the_repository_lacks_is_refused():
    (found,) = _problems({}, simulation=SIMULATION_MISSING)[:1]
    assert found.startswith("s2: apt cannot install NCCL 2.30.7-1+cuda13.0 from http://repo/: Version '2.28.3-1+cuda12.9' for 'libnccl2' was not found")


def test_an_install_that_removes_other_packages_is_refused():
    assert _problems({}, simulation=SIMULATION_REMOVES) == [
        "s2: installing NCCL 2.30.7-1+cuda13.0 would remove cuda-nccl-meta. Resolve that by hand and run again."
    ]


def test_nccl_conf_leaves_auto_to_nccl_and_refuses_non_nccl_keys():
    text = nccl_pin.nccl_conf({"NCCL_IB_HCA": "rocep1s0f0,roceP2p1s0f0", "NCCL_IB_GID_INDEX": "auto", "NCCL_DEBUG": "WARN"})
    assert text.splitlines()[1:] == ["NCCL_DEBUG=WARN", "# NCCL_IB_GID_INDEX: auto (chosen at run time)", "NCCL_IB_HCA=rocep1s0f0,roceP2p1s0f0"]
    with pytest.raises(ValueError, match="GLOO_SOCKET_IFNAME='eth0' is not an NCCL setting"):
        nccl_pin.nccl_conf({"GLOO_SOCKET_IFNAME": "eth0"})
    with pytest.raises(ValueError, match="is not an NCCL setting"):
        nccl_pin.nccl_conf({"NCCL_DEBUG": "WARN\nNCCL_NET=Socket"})


# The module, as Ansible runs it.


def _run_module(tmp_path, output, rc=0, nvidia_smi=None):
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"nvidia_smi": nvidia_smi or str(DOUBLE)}}))
    env = dict(os.environ, PYTHONPATH=str(REPO / "collections"), NVIDIA_SMI_DOUBLE_RC=str(rc))
    if output:
        env["NVIDIA_SMI_DOUBLE_OUTPUT"] = str(output)
    result = subprocess.run([sys.executable, str(MODULE), str(args)], capture_output=True, text=True, env=env, check=False)
    return json.loads(result.stdout)


def test_module_reads_the_gb10_table(tmp_path):
    out = _run_module(tmp_path, FIXTURES / "gb10/nvidia-smi.txt")
    assert (out["state"], out["version"], out["changed"]) == ("loaded", "580.126.09", False)
    assert out["gpus"][0]["memory_total"] is None


def test_module_reports_no_driver_without_failing(tmp_path):
    recording = tmp_path / "no-driver.txt"
    recording.write_text(NO_DRIVER)
    out = _run_module(tmp_path, recording, rc=9)
    assert out.get("failed") is not True
    assert out["state"] == "not_loaded"


def test_module_without_nvidia_smi(tmp_path):
    out = _run_module(tmp_path, None, nvidia_smi="no-such-nvidia-smi")
    assert out["state"] == "absent"


def test_dpkg_installed_reads_real_dpkg_query_output():
    """This machine's own dpkg: two installed packages and one it has never heard of (exit 1, still read)."""
    query = subprocess.run(
        dpkg.query_argv(["dpkg", "coreutils", "sparkfleet-no-such-package"]),  # the argv the roles run (filter dpkg_query_argv)
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert query.returncode == 1
    assert "sparkfleet-no-such-package" in query.stderr
    found = dpkg.installed_versions(query.stdout)
    assert set(found) == {"dpkg", "coreutils"}
    own = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "dpkg"], capture_output=True, text=True, check=True).stdout
    assert found["dpkg"] == own


def test_dpkg_installed_leaves_out_removed_and_unknown_packages_and_names_a_bad_line():
    output = (
        "docker.io\tii \t26.1.5+dfsg1-9\n"
        "libnccl2\thi \t2.30.7-1+cuda13.0\n"  # held, installed
        "nvidia-driver\trc \t580.95.05-1\n"  # removed, its configuration kept: not installed
        "libnccl-dev\tun \t\n"  # known, never installed
        "half\tiU \t1.0\n"  # unpacked, not configured: its files are there
    )
    assert dpkg.installed_versions(output) == {"docker.io": "26.1.5+dfsg1-9", "libnccl2": "2.30.7-1+cuda13.0", "half": "1.0"}
    assert dpkg.installed_versions("") == {}
    with pytest.raises(ValueError, match=r"'docker.io 26.1.5' is not NAME<TAB>STATUS<TAB>VERSION"):
        dpkg.installed_versions("docker.io 26.1.5\n")


DPKG_STATUS = """\
Package: libnccl2
Status: hold ok installed
Architecture: amd64
Version: 2.28.3-1+cuda12.9
Maintainer: sparkfleet tests <tests@example.org>
Description: held and installed

Package: libnccl-dev
Status: install ok installed
Architecture: amd64
Version: 2.28.3-1+cuda12.9
Maintainer: sparkfleet tests <tests@example.org>
Description: installed, not held

Package: nvidia-container-toolkit
Status: hold ok not-installed
Architecture: amd64
Maintainer: sparkfleet tests <tests@example.org>
Description: held, never installed
"""


def test_dpkg_held_lists_what_apt_mark_showhold_lists_from_the_same_database(tmp_path):
    """A dpkg database of our own (real dpkg-query and apt-mark read it): the one dpkg-query the nccl role makes
    answers both what is installed and what is held, as `apt-mark showhold` would say."""
    (tmp_path / "info").mkdir()
    (tmp_path / "updates").mkdir()
    (tmp_path / "available").write_text("")
    (tmp_path / "status").write_text(DPKG_STATUS)
    names = ["libnccl2", "libnccl-dev", "nvidia-container-toolkit"]
    query = subprocess.run(["dpkg-query", f"--admindir={tmp_path}", "-W", f"-f={dpkg.QUERY_FORMAT}", "--", *names], capture_output=True, text=True, check=True)
    showhold = subprocess.run(["apt-mark", "-o", f"Dir::State::status={tmp_path / 'status'}", "showhold"], capture_output=True, text=True, check=True)
    assert sorted(dpkg.held_packages(query.stdout)) == sorted(showhold.stdout.split()) == ["libnccl2", "nvidia-container-toolkit"]
    assert dpkg.installed_versions(query.stdout) == {"libnccl2": "2.28.3-1+cuda12.9", "libnccl-dev": "2.28.3-1+cuda12.9"}
    with pytest.raises(ValueError, match=r"'libnccl2 hi' is not NAME<TAB>STATUS<TAB>VERSION"):
        dpkg.held_packages("libnccl2 hi\n")


# NCCL's release pinned, its build resolved from what the repository offers (NVIDIA's version strings:
# one package per release and CUDA it was built for, as apt-cache madison lists NVIDIA's sbsa repository).
MADISON_NVIDIA = """\
  libnccl2 | 2.31.2-1+cuda13.3 | https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/sbsa  Packages
  libnccl2 | 2.30.7-1+cuda13.3 | https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/sbsa  Packages
  libnccl2 | 2.30.7-1+cuda12.9 | https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/sbsa  Packages
  libnccl2 | 2.29.7-1+cuda13.0 | https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/sbsa  Packages
  libnccl2 | 2.28.9-1+cuda13.0 | https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/sbsa  Packages
"""


def test_offered_nccl_versions_are_read_from_madison_in_its_order():
    assert nccl_pin.offered_versions(MADISON_NVIDIA) == [
        "2.31.2-1+cuda13.3", "2.30.7-1+cuda13.3", "2.30.7-1+cuda12.9", "2.29.7-1+cuda13.0", "2.28.9-1+cuda13.0",
    ]  # fmt: skip
    assert nccl_pin.offered_versions("") == []


def test_the_release_resolves_to_its_build_for_the_nodes_cuda_major_never_to_a_decoy():
    offered = nccl_pin.offered_versions(MADISON_NVIDIA)
    assert nccl_pin.resolve_version("2.30.7-1", offered, 13) == "2.30.7-1+cuda13.3"
    assert nccl_pin.resolve_version("2.30.7-1", offered, "12") == "2.30.7-1+cuda12.9"
    # The newest CUDA minor of the release wins (CUDA's minor-version compatibility), whatever madison's order.
    assert nccl_pin.resolve_version("2.30.7-1", ["2.30.7-1+cuda13.0", "2.30.7-1+cuda13.3", "2.30.7-1+cuda13.1"], 13) == "2.30.7-1+cuda13.3"
    # A pin naming one build is taken as it is.
    assert nccl_pin.resolve_version("2.29.7-1+cuda13.0", offered, 13) == "2.29.7-1+cuda13.0"


def test_the_guessed_pin_of_old_is_refused_naming_what_the_repository_has():
    """2.30.7-1+cuda13.0, the pin this collection once shipped, is not a version NVIDIA publishes."""
    offered = nccl_pin.offered_versions(MADISON_NVIDIA)
    with pytest.raises(nccl_pin.NcclPinError) as refused:
        nccl_pin.resolve_version("2.30.7-1+cuda13.0", offered, 13)
    assert str(refused.value) == (
        "NCCL 2.30.7-1+cuda13.0 has no build for CUDA 13 in the repository (it has 2.30.7-1+cuda13.3, 2.30.7-1+cuda12.9); "
        "it offers: 2.31.2-1+cuda13.3, 2.30.7-1+cuda13.3, 2.30.7-1+cuda12.9, 2.29.7-1+cuda13.0, 2.28.9-1+cuda13.0. "
        "Pin a release it has a CUDA 13 build of (nccl_version, like 2.30.7-1), or check the repository (cuda_repo_url)."
    )
    with pytest.raises(nccl_pin.NcclPinError, match=r"^NCCL 2.31.2-1 has no build for CUDA 12 in the repository \(it has 2.31.2-1\+cuda13.3\)"):
        nccl_pin.resolve_version("2.31.2-1", offered, 12)
    with pytest.raises(nccl_pin.NcclPinError, match="it offers: nothing"):
        nccl_pin.resolve_version("2.30.7-1", [], 13)


@pytest.mark.parametrize("pin", ["2.30.7", "v2.30.7-1", "2.30.7-1+cu13", "latest", ""])
def test_a_pin_not_spelled_as_nvidia_spells_releases_is_refused_naming_it(pin):
    with pytest.raises(nccl_pin.NcclPinError, match=rf"^nccl_version {re.escape(repr(pin))} is not an NCCL release: write it as NVIDIA does, like 2.30.7-1"):
        nccl_pin.resolve_version(pin, ["2.30.7-1+cuda13.3"], 13)


def test_a_cuda_major_that_is_not_a_number_is_refused():
    with pytest.raises(nccl_pin.NcclPinError, match=r"the node's CUDA major version '13.0' is not a number: set nccl_cuda_major"):
        nccl_pin.resolve_version("2.30.7-1", ["2.30.7-1+cuda13.3"], "13.0")


def test_the_filter_returns_a_refusal_for_the_role_to_fail_with_as_its_first_line():
    from ansible_collections.sparkfleet.vllm.plugins.filter import host_stack

    assert host_stack.nccl_resolved_version(MADISON_NVIDIA, "2.30.7-1", "13") == {"version": "2.30.7-1+cuda13.3", "problem": ""}
    refused = host_stack.nccl_resolved_version(MADISON_NVIDIA, "2.30.7-1+cuda13.0", "13")
    assert refused["version"] == ""
    assert refused["problem"].startswith("NCCL 2.30.7-1+cuda13.0 has no build for CUDA 13 in the repository")


# DGX OS owns its driver (Canonical-signed nvidia-driver-580-open, Secure Boot): verified, never replaced.
DGX_OWNED = {node: "nvidia-driver-580-open 580.95.05-0ubuntu1" for node in ("s1", "s2", "s3")}


def test_dgx_os_nodes_on_one_driver_at_the_minimum_need_nothing():
    plan = nvidia_driver.plan({"s1": "580.126.09", "s2": "580.126.09", "s3": "580.126.09"}, "580.95", "580.95.05", os_owned=DGX_OWNED)
    assert plan == {"install": {}, "version": "580.126.09", "problems": []}


@pytest.mark.parametrize("allow_downgrade", [False, True])
def test_mixed_drivers_on_dgx_os_install_nothing_and_name_every_node_and_the_way_out(allow_downgrade):
    """Seen on real GB10 pairs: one node updated, the other not. The CUDA-repository driver is never put over DGX
    OS's, nor a node rebooted for it, downgrades allowed or not."""
    owned = dict(DGX_OWNED, s3="nvidia-driver-580-open 580.126.09-0ubuntu1")
    loaded = {"s1": "580.95.05", "s2": "580.95.05", "s3": "580.126.09"}
    plan = nvidia_driver.plan(loaded, "580.95", "580.95.05", available=["580.95.05", "580.126.09"], allow_downgrade=allow_downgrade, os_owned=owned)
    assert plan["install"] == {}
    (problem,) = plan["problems"]
    assert problem.startswith(
        "The nodes run s1 580.95.05 (nvidia-driver-580-open 580.95.05-0ubuntu1), s2 580.95.05 (nvidia-driver-580-open 580.95.05-0ubuntu1), "
        "s3 580.126.09 (nvidia-driver-580-open 580.126.09-0ubuntu1). "
    ), problem
    # Up to the newest by default (s1 and s2 would change), down to the pin when downgrades are allowed (s3 would).
    assert f"DGX OS owns the driver on {'s3' if allow_downgrade else 's1, s2'} (Canonical-signed packages" in problem
    assert "this role never replaces them nor reboots for them, and nothing was changed." in problem
    assert problem.endswith(nvidia_driver.DGX_OS_UPDATE + " at or above 580.95, then run again.")


def test_a_library_mismatch_on_dgx_os_is_not_answered_with_a_new_driver():
    """nvidia-smi's "Driver/library version mismatch" reads as no driver loaded: on DGX OS that is a reboot or an OS
    update to finish, not a reason to install nvidia-open over the Canonical-signed packages."""
    mismatch = nvidia_driver.loaded_driver(18, "", "Failed to initialize NVML: Driver/library version mismatch\n")
    plan = nvidia_driver.plan({"s1": mismatch["version"], "s2": "580.95.05"}, "580.95", "580.95.05", os_owned=DGX_OWNED)
    assert plan["install"] == {}
    assert plan["problems"][0].startswith("The nodes run s1 no driver loaded (nvidia-driver-580-open 580.95.05-0ubuntu1), s2 580.95.05")
    assert "s1: no driver answers." in plan["problems"][0]


def test_a_node_not_owned_by_dgx_os_beside_dgx_os_ones_still_gets_the_driver():
    """A GB10 twin on plain Ubuntu beside DGX OS Sparks: it alone is brought to the cluster's driver."""
    plan = nvidia_driver.plan({"s1": "580.95.05", "s2": "580.95.05", "s4": None}, "580.95", "580.95.05", os_owned={"s1": "x", "s2": "x"})
    assert plan == {"install": {"s4": "no driver answers"}, "version": "580.95.05", "problems": []}


def test_nodes_whose_os_does_not_own_the_driver_are_not_taken_for_dgx_os_however_they_come():
    """The role renders "" for a node without /etc/dgx-release, which Ansible 2.19 passes on as None."""
    for owner in (None, ""):
        plan = nvidia_driver.plan({"s1": None, "s2": None}, "580.95", "580.95.05", os_owned={"s1": owner, "s2": owner})
        assert plan == {"install": {"s1": "no driver answers", "s2": "no driver answers"}, "version": "580.95.05", "problems": []}
