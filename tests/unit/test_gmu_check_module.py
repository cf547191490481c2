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
    proc = tmp_path / "proc"  # no cgroup, no processes: a node outside any memory cgroup
    params = {"meminfo_path": str(meminfo), "proc_path": str(proc), "cgroup_root": str(tmp_path / "cgroup"), "nvidia_smi": str(DOUBLE), **args}
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
    # No driver_version recording given: the double prints the memory query again, which is no version.
    assert out["driver_version"] is None


def test_the_loaded_driver_version_is_reported_for_rank_parity(tmp_path, monkeypatch):
    # `--query-gpu=driver_version --format=csv,noheader` cut from the captured H200 CSV (both GPUs: one driver).
    rows = (FIXTURES / "h200-x2/query-gpu.csv").read_text().splitlines()[1:]
    driver = tmp_path / "driver.csv"
    driver.write_text("".join(row.split(", ")[3] + "\n" for row in rows))
    monkeypatch.setenv("NVIDIA_SMI_DOUBLE_DRIVER_OUTPUT", str(driver))
    out = run_module(tmp_path, smi_output="gb10/query-index-name-memory-nounits.csv", gmu=0.85)
    assert out["driver_version"] == "580.159.04"
    # Without a GPU there is no driver to report.
    missing = run_module(tmp_path, nvidia_smi=str(tmp_path / "nvidia-smi"), require_gpu=False, check_free_memory=False, gmu=0.5)
    assert missing["driver_version"] is None


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


def fake_node(tmp_path, limit_gib, node_use_gib, rank_use_gib, inactive_file_gib=0.0, foreign=None):
    """A simulated node as gmu_check meets it: cgroup v1 tree (node cgroup, the rank's cgroup below it) and /proc."""
    gib = 1024**3
    proc, cg = tmp_path / "proc", tmp_path / "cgroup"
    node, rank = cg / "memory/docker/node1", cg / "memory/docker/node1/rank0"
    for directory in (node, rank):
        directory.mkdir(parents=True, exist_ok=True)
    (node / "memory.usage_in_bytes").write_text(str(int(node_use_gib * gib)))
    (node / "memory.stat").write_text(f"hierarchical_memory_limit {int(limit_gib * gib)}\ntotal_inactive_file {int(inactive_file_gib * gib)}\n")
    (rank / "memory.usage_in_bytes").write_text(str(int(rank_use_gib * gib)))
    (rank / "memory.stat").write_text(f"hierarchical_memory_limit {int(limit_gib * gib)}\ntotal_inactive_file 0\n")
    (rank / "cgroup.procs").write_text("400\n401\n")
    (node / "cgroup.procs").write_text("1\n500\n")
    processes = [("self", "/docker/node1", "python3", 0.05), ("400", "/docker/node1/rank0", "vllm", 2.0), ("401", "/docker/node1/rank0", "python3", 1.5)]
    if foreign:
        processes.append(("500", "/docker/node1", "hog", foreign))
    for pid, path, name, rss_gib in processes:
        (proc / pid).mkdir(parents=True, exist_ok=True)
        (proc / pid / "cgroup").write_text(f"4:memory:{path}\n0::/\n")
        (proc / pid / "status").write_text(f"Name:\t{name}\nVmRSS:\t{int(rss_gib * gib / 1024)} kB\n")
    return proc, cg


def run_on_fake_node(tmp_path, proc, cg, **args):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 24000000 kB\nMemFree: 20000000 kB\nMemAvailable: 21000000 kB\n")  # the host's: not the node's
    params = {"meminfo_path": str(meminfo), "proc_path": str(proc), "cgroup_root": str(cg), "nvidia_smi": "/nonexistent", "require_gpu": False}
    params.update({"os_reserve_gib": 0.5, "head_reserve_gib": 0, **args})
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": params}))
    env = dict(os.environ, PYTHONPATH=str(REPO / "collections"))
    result = subprocess.run([sys.executable, str(MODULE), str(args_file)], capture_output=True, text=True, env=env, check=False)
    return json.loads(result.stdout)


def test_a_node_in_a_memory_cgroup_has_the_limit_and_its_engine_counts_as_available(tmp_path):
    # 4.5 GiB node, engine rank holds 3.8 GiB of the 4.1 GiB in use: a re-run at gmu 0.85 fits.
    proc, cg = fake_node(tmp_path, limit_gib=4.5, node_use_gib=4.1, rank_use_gib=3.8)
    out = run_on_fake_node(tmp_path, proc, cg, gmu=0.85, engine_rank_pid=400)
    assert out.get("failed") is not True, out
    assert out["cgroup_limited"] is True
    assert out["total_bytes"] == int(4.5 * 1024**3)
    assert out["engine_held_bytes"] == int(3.8 * 1024**3)
    assert out["verdict"] == "fits"
    assert "held by this engine's own rank" in out["message"]
    # Without the engine counted, the same node is full: the check a serving Spark failed before.
    alone = run_on_fake_node(tmp_path, proc, cg, gmu=0.85)
    assert alone["failed"] is True
    assert alone["verdict"] == "does_not_fit"


def test_a_foreign_process_is_named_with_its_memory(tmp_path):
    proc, cg = fake_node(tmp_path, limit_gib=4.5, node_use_gib=4.4, rank_use_gib=3.0, foreign=1.2)
    out = run_on_fake_node(tmp_path, proc, cg, gmu=0.85, engine_rank_pid=400)
    assert out["failed"] is True
    assert out["verdict"] == "does_not_fit"
    assert "hog (pid 500) 1.2 GiB" in out["msg"], out["msg"]
    assert "vllm" not in out["msg"]  # the engine's own processes are not "other processes"
    assert "lower engine_gpu_memory_utilization" in out["msg"]
