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


def tiny_model_config():
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_tiny_model", REPO / "images/engine-cpu/make_tiny_model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.model_config(vocab_size=384, eos_token_id=0)


CPU_PROFILE = {"gmu": 0.85, "require_gpu": False, "check_free_memory": False, "tensor_parallel_size": 4, "cpu_kvcache_space_gib": 1.0}


def test_kv_predicted_and_compared_with_the_engines_print(tmp_path):
    log = "(EngineCore pid=1) INFO CPU KV cache size: 4,193,498 tokens, Maximum concurrency for 500,000 tokens per request: 8.39x"
    out = run_module(tmp_path, model_config=tiny_model_config(), max_model_len=500_000, max_num_seqs=5, engine_log=log, **CPU_PROFILE)
    kv = out["kv"]
    assert kv["bytes_per_token"] == 256
    assert kv["predicted_tokens"] == 4_194_304
    assert kv["actual_tokens"] == 4_193_498
    assert kv["within_2_percent"]
    assert kv["oversubscription"] == pytest.approx(2_500_000 / 4_194_304)
    assert "predicted 4,194,304 KV tokens per rank" in kv["message"]
    assert "the engine printed 4,193,498" in kv["message"]


def test_kv_config_read_from_the_node(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(tiny_model_config()))
    out = run_module(tmp_path, model_config_path=str(path), **CPU_PROFILE)
    assert out["kv"]["predicted_tokens"] == 4_194_304


def test_kv_unknown_architecture_is_skipped_and_memory_still_checked(tmp_path):
    out = run_module(tmp_path, model_config={"architectures": ["Mystery"]}, **CPU_PROFILE)
    assert out.get("failed") is not True
    assert out["verdict"] == "fits"
    assert "no num_hidden_layers" in out["kv"]["skipped"]
    assert any("KV prediction skipped" in warning for warning in out["advice"])


def test_kv_missing_config_is_skipped(tmp_path):
    out = run_module(tmp_path, model_config_path=str(tmp_path / "absent.json"), **CPU_PROFILE)
    assert "no model config to predict KV from" in out["kv"]["skipped"]


def test_kv_oversubscribed_lane_warns_or_fails_when_asked(tmp_path):
    # 1 GiB / 256 B = 4,194,304 tokens; 15 x 1,000,000 = 15,000,000 tokens asked: 3.58x.
    args = dict(CPU_PROFILE, model_config=tiny_model_config(), max_model_len=1_000_000, max_num_seqs=15)
    warned = run_module(tmp_path, **args)
    assert warned.get("failed") is not True
    assert any("3.58x, above max_oversubscription 1.5" in warning and "Lower max_num_seqs to 4" in warning for warning in warned["advice"])
    failed = run_module(tmp_path, fail_on_oversubscription=True, **args)
    assert failed["failed"] is True
    assert "Lower max_num_seqs to 4" in failed["msg"]
