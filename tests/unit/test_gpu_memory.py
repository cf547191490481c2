"""gmu arithmetic on real meminfo/nvidia-smi outputs and on meminfo variants, with the numbers spelled out."""

from __future__ import annotations

import pathlib

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import gpu_memory as gm
from ansible_collections.sparkfleet.vllm.plugins.module_utils import node_memory as nm
from ansible_collections.sparkfleet.vllm.plugins.module_utils import nvidia_smi as smi

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "data/gpu"
GIB = gm.GIB
KB = 1024
GB10_TOTAL_KB = 127_600_748  # MemTotal of a DGX Spark: 121.69 GiB


def meminfo(total_kb=GB10_TOTAL_KB, free_gib=None, available_gib=113.0, cached_gib=0.0, swap_gib=16.0):
    free_gib = available_gib if free_gib is None else free_gib
    text = "\n".join(
        [
            f"MemTotal: {total_kb} kB",
            f"MemFree: {int(free_gib * GIB / KB)} kB",
            f"MemAvailable: {int(available_gib * GIB / KB)} kB",
            "Buffers: 0 kB",
            f"Cached: {int(cached_gib * GIB / KB)} kB",
            f"SwapTotal: {int(swap_gib * GIB / KB)} kB",
            "HugePages_Total: 0",
        ]
    )
    return gm.parse_meminfo(text)


def test_parse_real_meminfo():
    h200 = gm.parse_meminfo((FIXTURES / "h200-x2/meminfo.txt").read_text())
    assert h200["MemTotal"] == 263_998_500 * KB
    assert h200["Cached"] == 944_188 * KB
    assert h200["HugePages_Total"] == 0  # a count, not kB
    gb10 = gm.parse_meminfo((FIXTURES / "gb10/meminfo-partial.txt").read_text())
    assert gb10 == {"MemTotal": 127_600_748 * KB, "MemAvailable": 118_566_368 * KB}


def test_gb10_worker_at_the_recipes_gmu_fits():
    # 0.85 x 121.69 GiB = 103.44 GiB <= 113.07 GiB available (the published idle box)
    gb10 = gm.parse_meminfo((FIXTURES / "gb10/meminfo-partial.txt").read_text())
    result = gm.plan_unified(0.85, gb10)
    assert result["verdict"] == "fits"
    assert result["required_bytes"] == int(0.85 * 127_600_748 * KB)
    # max for a worker: (121.69 - 8.5 OS) / 121.69 = 0.930
    assert result["max_gmu"] == 0.93


def test_gb10_head_matches_the_recipes_lore():
    # head ceiling: (121.69 - 8.5 OS - 5 API) / 121.69 = 0.8891 -> 0.885 fits, 0.89 does not (NV_ERR_NO_MEMORY)
    idle = meminfo(available_gib=118.0)
    assert gm.plan_unified(0.885, idle, is_head=True)["verdict"] == "fits"
    result = gm.plan_unified(0.89, idle, is_head=True)
    assert result["verdict"] == "does_not_fit"
    assert result["max_gmu"] == 0.885
    assert result["recommended_gmu"] == 0.885
    assert "Lower engine_gpu_memory_utilization to 0.885" in result["message"]
    assert "the head's API process 5.0 GiB" in result["message"]


@pytest.mark.parametrize("is_head", [False, True])
def test_gmu_099_never_fits_and_names_the_recommendation(is_head):
    result = gm.plan_unified(0.99, meminfo(), is_head=is_head)
    assert result["verdict"] == "does_not_fit"
    assert f"to {result['recommended_gmu']}" in result["message"]
    assert "gmu 0.99 asks for 120.5 GiB of 121.7 GiB" in result["message"]


def test_large_page_cache_fits_after_dropping_caches():
    # 0.85 x 121.69 = 103.44 GiB needed free; 40 GiB free, 70 GiB page cache, 110 GiB available
    result = gm.plan_unified(0.85, meminfo(free_gib=40, cached_gib=70, available_gib=110))
    assert result["verdict"] == "fits_after_drop_caches"
    assert result["page_cache_bytes"] == 70 * GIB
    assert "drop_caches" in result["message"]


def test_little_memory_does_not_fit_and_recommends_what_does():
    # head: (60 available - 5 API) / 121.69 = 0.452 -> 0.45
    result = gm.plan_unified(0.85, meminfo(available_gib=60), is_head=True)
    assert result["verdict"] == "does_not_fit"
    assert result["recommended_gmu"] == 0.45
    assert "only 60.0 GiB is available even after dropping caches" in result["message"]
    assert "desktop session" in result["message"]


def test_swap_off_is_a_warning_not_a_verdict():
    result = gm.plan_unified(0.85, meminfo(swap_gib=0))
    assert result["verdict"] == "fits"
    assert result["advice"]
    assert "swap is off" in result["advice"][0]
    assert gm.plan_unified(0.85, meminfo())["advice"] == []


def test_cgroup_limit_is_the_total_inside_one():
    limit = nm.cgroup_number("68719476736\n")  # 64 GiB
    result = gm.plan_unified(0.85, meminfo(), limit=limit)
    assert result["total_bytes"] == 64 * GIB
    assert nm.cgroup_number("max\n") is None
    assert nm.cgroup_number("9223372036854771712") is None  # cgroup v1 "unlimited"


def test_cpu_engine_checks_only_the_ceiling():
    # vLLM's CPU build sizes KV from VLLM_CPU_KVCACHE_SPACE: free memory is not what gmu takes there
    tight = meminfo(total_kb=24 * GIB // KB, available_gib=4)
    assert gm.plan_unified(0.85, tight, head_reserve=0, os_reserve=2 * GIB, check_free=False)["verdict"] == "fits"
    result = gm.plan_unified(0.99, tight, head_reserve=0, os_reserve=2 * GIB, check_free=False)
    assert result["verdict"] == "does_not_fit"
    assert result["recommended_gmu"] == 0.915  # (24 - 2) / 24 = 0.9167


def test_h200_discrete():
    gpus = smi.parse_query_csv((FIXTURES / "h200-x2/query-gpu.csv").read_text())
    result = gm.plan_discrete(0.9, gpus)
    assert result["verdict"] == "fits"
    assert result["total_bytes"] == 143_771 * 1024 * 1024
    assert result["recommended_gmu"] == 0.95  # 143156 / 143771 = 0.9957, capped
    busy = [dict(gpu, **{"memory.free": 60_000 * 1024 * 1024}) for gpu in gpus]
    result = gm.plan_discrete(0.9, busy)
    assert result["verdict"] == "does_not_fit"
    assert result["recommended_gmu"] == 0.415  # 60000 / 143771 = 0.4173
    with pytest.raises(gm.GpuMemoryError, match="unified memory"):
        gm.plan_discrete(0.85, smi.parse_query_csv((FIXTURES / "gb10/query-memory-util-power.csv").read_text()))


@pytest.mark.parametrize(
    ("value", "message"),
    [(0, "must be above 0"), (-0.5, "must be above 0"), ("abc", "is not a number"), (True, "is not a number"), (None, "is not a number")],
)
def test_bad_gmu(value, message):
    with pytest.raises(gm.GpuMemoryError, match=message):
        gm.plan_unified(value, meminfo())


# The GB10 with the engine up (recipe.md: 0.85 keeps a desktop session alive, 0.885 only on a
# stripped OS, 0.89+ is NV_ERR_NO_MEMORY on the head). Idle: MemAvailable 113.07 GiB of 121.69
# (fixtures/gpu/gb10/meminfo-partial.txt). A desktop session takes ~3 GiB more.
GB10_IDLE_AVAILABLE_GIB = 118_566_368 * KB / GIB
DESKTOP_GIB = 3.0


def gb10_serving(engine_gmu, desktop=False, engine_process_gib=1.5):
    """The GB10 head while its engine serves: the engine holds gmu x total plus its processes."""
    held = engine_gmu * GB10_TOTAL_KB * KB + engine_process_gib * GIB
    available = GB10_IDLE_AVAILABLE_GIB - (DESKTOP_GIB if desktop else 0) - held / GIB
    return meminfo(available_gib=available), held


def test_gb10_rerun_with_the_engine_up_at_085_fits():
    info, held = gb10_serving(0.85)
    assert info["MemAvailable"] < 12.5 * GIB  # what a serving Spark shows
    result = gm.plan_unified(0.85, info, is_head=True, engine_held=held)
    assert result["verdict"] == "fits", result["message"]
    assert result["engine_held_bytes"] == int(held)
    # The same node judged without its own engine: refused (the bug this guards against).
    assert gm.plan_unified(0.85, info, is_head=True)["verdict"] == "does_not_fit"


def test_gb10_head_rerun_counts_its_api_and_engine_core_beside_the_gpu_share():
    """The head's rank holds gmu x total on the GPU (not charged to its cgroup) and ~5 GiB in its API server and
    EngineCore (charged). Crediting only the gmu share refused a relaunch that fits once the rank stops."""
    total = GB10_TOTAL_KB * KB
    process = 5 * GIB
    info, _held = gb10_serving(0.85, engine_process_gib=process / GIB)
    info = dict(info, MemAvailable=info["MemAvailable"] - 2 * GIB, MemFree=info["MemFree"] - 2 * GIB)  # the OS at its 8.5 GiB reserve
    credited_before = nm.engine_held(process, 0.85, total)
    assert gm.plan_unified(0.85, info, is_head=True, engine_held=credited_before)["verdict"] == "does_not_fit"
    held = nm.engine_held(process, 0.85, total, process_bytes_cap=5 * GIB)
    assert held == int(0.85 * total) + process
    result = gm.plan_unified(0.85, info, is_head=True, engine_held=held)
    assert result["verdict"] == "fits", result["message"]


def test_gb10_0885_on_a_head_with_a_desktop_is_refused_even_counting_the_engine():
    info, held = gb10_serving(0.85, desktop=True)
    result = gm.plan_unified(0.885, info, is_head=True, engine_held=held, others=[(2345, "gnome-shell", int(1.1 * GIB))])
    assert result["verdict"] == "does_not_fit"
    assert "gnome-shell (pid 2345) 1.1 GiB" in result["message"]
    assert result["others_bytes"] > DESKTOP_GIB * GIB
    # A stripped head (no desktop) takes 0.885: the recipe's ceiling.
    info, held = gb10_serving(0.85)
    assert gm.plan_unified(0.885, info, is_head=True, engine_held=held)["verdict"] == "fits"


def test_gb10_089_is_refused_on_the_head_whatever_the_engine_holds():
    info, held = gb10_serving(0.85)
    result = gm.plan_unified(0.89, info, is_head=True, engine_held=held)
    assert result["verdict"] == "does_not_fit"
    assert result["max_gmu"] == 0.885


def test_engine_held_never_counts_more_than_is_in_use():
    # A wrong or stale figure cannot make memory appear: held is capped at what the node uses.
    info = meminfo(available_gib=100.0)
    result = gm.plan_unified(0.85, info, engine_held=500 * GIB)
    assert result["engine_held_bytes"] == int(GB10_TOTAL_KB * KB - 100 * GIB)
    assert result["mem_available_bytes"] == GB10_TOTAL_KB * KB
