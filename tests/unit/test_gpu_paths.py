"""What the collection's GPU code paths did on a real NVIDIA H200 pair (benchmarks/gpu_paths.py, run
through `device` on 2026-11-30, driver 580.159.04): the recordings under tests/data/gpu/h200-x2-580.159.04
are read back here with the collection's own parsers and modules, so CI (no GPU) keeps them true."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import gpu_memory, nvidia_driver, nvidia_smi

from .test_gmu_check_module import run_module

RUN = pathlib.Path(__file__).resolve().parents[1] / "data/gpu/h200-x2-580.159.04"
MIB = 1024**2


@pytest.fixture(scope="module")
def paths():
    return json.loads((RUN / "gpu-paths.json").read_text())["paths"]


def test_the_real_nvidia_smi_table_gives_the_driver_and_both_gpus(paths):
    table = (RUN / "nvidia-smi.txt").read_text()
    driver = nvidia_driver.loaded_driver(0, table, "")
    assert (driver["state"], driver["version"], driver["cuda_version"]) == ("loaded", "580.159.04", "13.0")
    assert [gpu["name"] for gpu in driver["gpus"]] == ["NVIDIA H200", "NVIDIA H200"]
    assert {gpu["memory_total"] for gpu in driver["gpus"]} == {143771 * MIB}
    # The module said the same on the machine itself.
    assert paths["gpu_driver_info"]["data"]["version"] == "580.159.04"


def test_gmu_085_fits_the_idle_h200s_and_is_refused_while_another_process_holds_57_gib(tmp_path, paths):
    idle = run_module(tmp_path, smi_output=str(RUN / "query-gmu.csv"), gmu=0.85, require_gpu=True)
    assert (idle["memory"], idle["verdict"]) == ("discrete", "fits")
    held = run_module(tmp_path, smi_output=str(RUN / "query-gmu-held.csv"), gmu=0.85, require_gpu=True)
    assert held["failed"] is True
    assert held["verdict"] == "does_not_fit"
    assert held["recommended_gmu"] == 0.59
    assert "the fullest GPU has 83.4 GiB free of 140.4 GiB" in held["msg"]
    # What the module answered on the H200s, with the GPU really held, agrees with the replay.
    assert (paths["gmu_check held"]["data"]["verdict"], paths["gmu_check held"]["data"]["recommended_gmu"]) == ("does_not_fit", 0.59)


def test_the_held_gpu_is_the_only_one_short_of_memory():
    gpus = nvidia_smi.parse_query_csv((RUN / "query-gmu-held.csv").read_text(), fields=["index", "name", "memory.total", "memory.used", "memory.free"])
    assert [gpu["memory.free"] // MIB for gpu in gpus] == [85388, 143153]
    assert gpu_memory.plan_discrete(0.59, gpus)["verdict"] == "fits"


def test_the_clock_burn_reads_the_clock_under_load_and_its_tflops_are_the_products_own(paths):
    report = json.loads(paths["clock_burn"]["data"]["stdout"].splitlines()[-1])
    assert report["sm_clock_mhz"] >= 1500  # preflight's min_mhz: not wedged
    assert report["sm_clock_min_mhz"] == 1980
    # The H200 does ~790 TFLOPS bf16 at 8192^3; before the fix the figure divided by the planned
    # seconds, nvidia-smi calls included, and read ~260.
    assert 0.8 * 790 <= report["tflops"] <= 1.1 * 790
    idle_clocks = [line.split(", ") for line in (RUN / "query-clocks.csv").read_text().splitlines()]
    assert [row[1] for row in idle_clocks] == ["345", "345"]  # idle: the reason the burn reads under load


def test_the_nccl_probe_reports_the_nccl_torch_loads(paths):
    found = paths["nccl probe"]["data"]
    assert found["torch_nccl"] == "2.28.9"
    assert found["packages"] == {"nvidia-nccl-cu13": "2.28.9"}


def test_the_all_reduce_across_both_gpus_is_correct_and_its_bus_bandwidth_follows_nccl_tests(paths):
    ranks = paths["allreduce world 2"]["data"]
    assert [rank["rc"] for rank in ranks] == [0, 0]
    report = ranks[0]["report"]
    assert report["correct"] is True
    assert (report["ranks"], report["backend"], report["nccl"]) == (2, "nccl", "2.28.9")
    assert report["algbw_gbs"] == pytest.approx(report["bytes"] / report["seconds_per_allreduce"] / 1e9, rel=1e-3)
    assert report["busbw_gbs"] == pytest.approx(report["algbw_gbs"] * 2 * (2 - 1) / 2, rel=1e-6)
    single = paths["allreduce world 1"]["data"][0]["report"]
    assert single["correct"] is True
    assert single["busbw_gbs"] == 0.0  # one rank moves nothing over a link


def test_a_rank_given_the_wrong_master_port_ends_every_rank_with_a_message_naming_it(paths):
    ranks = paths["allreduce wrong master port"]["data"]
    assert [rank["rc"] for rank in ranks] == [3, 3]
    errors = [json.loads(rank["stdout"].splitlines()[-1])["error"] for rank in ranks]
    assert errors[0].startswith("rank 0 of 2 could not join the all-reduce at 127.0.0.1:50737 within 20 s (DistStoreError")
    assert errors[1].startswith("rank 1 of 2 could not join the all-reduce at 127.0.0.1:50738 within 20 s (DistNetworkError")
    assert all("same master address and port" in error for error in errors)
    # No raw traceback is what a user meets: the message is also on stderr, alone.
    assert all("Traceback" not in rank["stderr"] for rank in ranks)


def test_the_run_used_the_clusters_nccl_settings_less_exactly_those_that_need_rdma(paths):
    spec = importlib.util.spec_from_file_location("gpu_paths", RUN.parents[3] / "benchmarks/gpu_paths.py")
    gpu_paths = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_paths)
    kept, dropped = gpu_paths.gb10_nccl_settings()
    ran = paths["allreduce world 2"]["ran"]
    assert set(ran.split(" minus ", 1)[1].split(", ")) == set(dropped)
    assert all(not name.startswith("NCCL_IB_") for name in kept)
    assert kept["NCCL_MAX_NCHANNELS"] == "4"  # what caps the two H200s at ~82 GB/s over NVLink


PROBE_RUN = pathlib.Path(__file__).resolve().parents[1] / "data/gpu/h200-580.159.04-nccl-probe"


def test_the_nccl_probe_names_the_library_torch_loaded_and_its_sha256():
    """roles/nccl/files/image_nccl_version.py on one H200 (device, 2026-12-02; torch 2.11.0+cu130), run as a file
    and as the role runs it (python -c): the libnccl.so.2 it reports is the one libtorch_cuda links (ldd), and
    its sha256 is sha256sum's."""
    as_file, as_role_runs_it = (json.loads((PROBE_RUN / name).read_text()) for name in ("probe.json", "probe-as-python-c.json"))
    assert as_file == as_role_runs_it
    assert as_file["torch_nccl"] == "2.28.9"
    assert as_file["packages"] == {"nvidia-nccl-cu13": "2.28.9"}
    assert "Version: 2.28.9" in (PROBE_RUN / "pip-show.txt").read_text()
    (linked,) = [line.split("=>")[1].split("(")[0].strip() for line in (PROBE_RUN / "ldd-libtorch_cuda.txt").read_text().splitlines()]
    assert pathlib.PurePosixPath(as_file["library"]["path"]) == pathlib.PurePosixPath(os.path.normpath(linked))
    digest, path = (PROBE_RUN / "sha256sum.txt").read_text().splitlines()[0].split()
    assert (as_file["library"]["sha256"], as_file["library"]["path"]) == (digest, path)


def test_the_probe_asks_the_real_library_it_names_for_its_version():
    """The probe as it is now, on one H200 (device, 2026-12-03; the same torch 2.11.0+cu130): ncclGetVersion of the
    mapped libnccl.so.2 (NVIDIA's, from the nvidia-nccl-cu13 wheel) decodes to the wheel's version, the same file and
    bytes the earlier recording named. (That torch was built against the same NCCL: the two agree there; the unit
    tests with a library double show them differing.)"""
    found = json.loads((PROBE_RUN / "probe-ncclgetversion.json").read_text())
    earlier = json.loads((PROBE_RUN / "probe.json").read_text())
    assert found["nccl"] == "2.28.9" == found["packages"]["nvidia-nccl-cu13"]
    assert found["torch_nccl"] == "2.28.9"
    assert found["library"]["sha256"] == earlier["library"]["sha256"]


def test_the_nccl_probe_on_a_cpu_torch_reports_no_nccl_and_no_library():
    """The same probe against the venv's torch (vLLM's CPU build, as in the cpu engine image): nothing to report."""
    torch_found = importlib.util.find_spec("torch") is not None
    probe = pathlib.Path(__file__).resolve().parents[2] / "roles/nccl/files/image_nccl_version.py"
    result = subprocess.run([sys.executable, "-c", probe.read_text()], capture_output=True, text=True, check=True, timeout=300)
    found = json.loads(result.stdout.splitlines()[-1])
    assert torch_found  # make installs vLLM's CPU build (and its torch) into the venv
    assert (found["nccl"], found["torch_nccl"], found["library"]) == (None, None, None), found
