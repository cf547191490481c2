"""The gmu_check module run as Ansible runs it, on recorded outputs (nvidia-smi is a test double)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests/data/gpu"
DOUBLE = REPO / "tests/doubles/nvidia_smi_double.py"
MODULE = REPO / "plugins/modules/gmu_check.py"
KB = 1024


def run_module(tmp_path, smi_output=None, smi_rc=0, meminfo_text=None, **args):
    """Run the module; smi_output is a recording under tests/data/gpu or an absolute path."""
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(meminfo_text or (FIXTURES / "gb10/meminfo-partial.txt").read_text())
    params = {"meminfo_path": str(meminfo), "cgroup_memory_max_path": str(tmp_path / "no-cgroup"), "nvidia_smi": str(DOUBLE), **args}
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": params}))
    env = dict(os.environ, PYTHONPATH=str(REPO / "collections"), NVIDIA_SMI_DOUBLE_RC=str(smi_rc))
    if smi_output:
        env["NVIDIA_SMI_DOUBLE_OUTPUT"] = str(FIXTURES / smi_output)  # an absolute path stays as it is
    result = subprocess.run([sys.executable, str(MODULE), str(args_file)], capture_output=True, text=True, env=env, check=False)
    return json.loads(result.stdout)


def test_gb10_unified_memory_is_read_from_meminfo(tmp_path):
    out = run_module(tmp_path, smi_output="gb10/query-index-name-memory-nounits.csv", gmu=0.85)
    assert out.get("failed") is not True, out
    assert out["memory"] == "unified"
    assert out["verdict"] == "fits"
    assert out["total_bytes"] == 127_600_748 * KB
    assert out["gpus"][0]["name"] == "NVIDIA GB10"
    assert out["gpus"][0]["memory.total"] is None
    assert out["changed"] is False


def test_gb10_head_at_099_fails_with_the_recommendation(tmp_path):
    out = run_module(tmp_path, smi_output="gb10/query-index-name-memory-nounits.csv", gmu=0.99, is_head=True)
    assert out["failed"] is True
    assert "Lower engine_gpu_memory_utilization to 0.885" in out["msg"]
    assert out["recommended_gmu"] == 0.885


def test_h200_is_judged_on_gpu_memory(tmp_path):
    # The module's query (index, name, memory.total/used/free, nounits) cut from the captured H200 CSV.
    rows = (FIXTURES / "h200-x2/query-gpu.csv").read_text().splitlines()[1:]
    cut = [", ".join([cells[0], cells[1], *(cell.split()[0] for cell in cells[4:7])]) for cells in (row.split(", ") for row in rows)]
    recording = tmp_path / "h200-query.csv"
    recording.write_text("\n".join(cut) + "\n")
    out = run_module(tmp_path, smi_output=str(recording), meminfo_text=(FIXTURES / "h200-x2/meminfo.txt").read_text(), gmu=0.9)
    assert out["memory"] == "discrete"
    assert out["verdict"] == "fits"
    assert out["total_bytes"] == 143_771 * 1024 * 1024


@pytest.mark.parametrize(("smi", "rc", "reason"), [("missing", 0, "not found"), ("double", 9, "Driver/library version mismatch")])
def test_no_gpu_on_gb10_fails_with_the_fix(tmp_path, smi, rc, reason):
    args = {"nvidia_smi": str(tmp_path / "nvidia-smi")} if smi == "missing" else {}
    out = run_module(tmp_path, smi_rc=rc, gmu=0.85, **args)
    assert out["failed"] is True
    assert reason in out["msg"]
    assert "nvidia_driver role" in out["msg"]


def test_cpu_profile_checks_only_the_ceiling_and_report_only_never_fails(tmp_path):
    missing = str(tmp_path / "nvidia-smi")
    out = run_module(tmp_path, nvidia_smi=missing, require_gpu=False, check_free_memory=False, os_reserve_gib=2, head_reserve_gib=0, gmu=0.85)
    assert out["verdict"] == "fits"
    assert out["gpus"] == []
    out = run_module(tmp_path, nvidia_smi=missing, require_gpu=False, report_only=True, gmu=0.99)
    assert out.get("failed") is not True
    assert out["verdict"] == "does_not_fit"
