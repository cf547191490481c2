# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Will gmu x memory fit on this node, now? The arithmetic behind gmu_check.

GB10 (unified memory): the GPU has no memory of its own; CPU and GPU share
MemTotal. vLLM's start-up check compares gmu x total with *free* memory, so
page cache can make it refuse (fixed by dropping caches), and whatever the
engine does not take must still hold the OS and, on the head, the API
process (~5 GB more than a worker). gmu 0.89+ on a GB10 head ends in
NV_ERR_NO_MEMORY (recipe.md).

Discrete GPUs (H200, ...): gmu x the GPU's memory must fit in its free memory.

Pure Python, no Ansible imports.
"""

from __future__ import annotations

import math

GIB = 1024**3
# No node is given more than this, whatever the arithmetic says.
GMU_CAP = 0.95
_STEP = 0.005


class GpuMemoryError(ValueError):
    """Input that cannot be judged; the message names the fix."""


def parse_meminfo(text):
    """/proc/meminfo -> {field: bytes} (kB fields are converted; counts stay counts)."""
    fields = {}
    for line in text.splitlines():
        name, sep, rest = line.partition(":")
        if not sep:
            continue
        parts = rest.split()
        if not parts or not parts[0].isdigit():
            continue
        value = int(parts[0])
        fields[name.strip()] = value * 1024 if len(parts) > 1 and parts[1] == "kB" else value
    if "MemTotal" not in fields:
        raise GpuMemoryError("no MemTotal in /proc/meminfo: is this /proc/meminfo?")
    return fields


def page_cache(meminfo):
    """Memory a `drop_caches` can give back: file pages and reclaimable slab."""
    return meminfo.get("Cached", 0) + meminfo.get("Buffers", 0) + meminfo.get("SReclaimable", 0) - meminfo.get("Shmem", 0)


def check_gmu(value):
    """gmu as a float in (0, GMU_CAP], or a GpuMemoryError naming the bad value."""
    if isinstance(value, bool):
        raise GpuMemoryError(f"engine_gpu_memory_utilization={value!r} is not a number: use a fraction such as 0.85.")
    try:
        gmu = float(value)
    except (TypeError, ValueError):
        raise GpuMemoryError(f"engine_gpu_memory_utilization={value!r} is not a number: use a fraction such as 0.85.") from None
    if not math.isfinite(gmu) or gmu <= 0:
        raise GpuMemoryError(f"engine_gpu_memory_utilization={value!r} must be above 0 (the recipe uses 0.85).")
    return gmu


def _floor(value):
    return max(0.0, math.floor(round(value / _STEP, 6)) * _STEP)


def _gib(value):
    return f"{value / GIB:.1f} GiB"


def plan_unified(gmu, meminfo, is_head=False, head_reserve=5 * GIB, os_reserve=8.5 * GIB, limit=None, check_free=True, engine_held=0, others=()):
    """Judge gmu on a unified-memory node (GB10, or a CPU engine): numbers, verdict, recommendation.

    engine_held: bytes this engine's own rank holds on the node now. A relaunch stops that rank
    before it starts the new one, so they count as available; memory anything else holds does not.
    others: [(pid, name, rss_bytes)] of the largest other processes, named when gmu does not fit.
    """
    gmu = check_gmu(gmu)
    total = meminfo["MemTotal"] if limit is None else min(meminfo["MemTotal"], limit)
    available_now = meminfo.get("MemAvailable", meminfo.get("MemFree", 0))
    held = max(0, min(int(engine_held or 0), total - available_now))
    available = available_now + held
    free = meminfo.get("MemFree", available_now) + held
    others_bytes = max(0, total - available)
    cache = page_cache(meminfo)
    head_extra = head_reserve if is_head else 0
    required = gmu * total
    ceiling = min(GMU_CAP, (total - os_reserve - head_extra) / total)
    now = min(ceiling, (available - head_extra) / total)
    result = {
        "memory": "unified",
        "total_bytes": int(total),
        "required_bytes": int(required),
        "mem_available_bytes": int(available),
        "mem_free_bytes": int(free),
        "page_cache_bytes": int(cache),
        "head_reserve_bytes": int(head_extra),
        "os_reserve_bytes": int(os_reserve),
        "headroom_bytes": int(total - required - head_extra),
        "max_gmu": round(_floor(ceiling), 3),
        "recommended_gmu": round(_floor(now if check_free else ceiling), 3),
        "swap_total_bytes": int(meminfo.get("SwapTotal", 0)),
        "engine_held_bytes": int(held),
        "others_bytes": int(others_bytes),
        "advice": [],
    }
    if "SwapTotal" in meminfo and not meminfo["SwapTotal"]:
        result["advice"].append("swap is off: the recipe keeps swap on with vm.swappiness=0, so a memory spike pages out instead of killing the engine.")
    role = "head" if is_head else "worker"
    of_node = f"the node's {_gib(total)} memory cgroup limit" if meminfo.get("limited") else _gib(total)
    held_text = f", {_gib(held)} of it held by this engine's own rank (a relaunch frees it first)" if held else ""
    reserve_text = f"the OS keeps {_gib(os_reserve)}" + (f" and the head's API process {_gib(head_extra)}" if is_head else "")
    if gmu > ceiling:
        result["verdict"] = "does_not_fit"
        result["message"] = (
            f"gmu {gmu} asks for {_gib(required)} of {_gib(total)} on this {role}; {reserve_text}, so at most gmu "
            f"{result['max_gmu']} can ever fit here. Lower engine_gpu_memory_utilization to {result['recommended_gmu']} "
            f"(the recipe uses 0.85; 0.89+ kills a GB10 head with NV_ERR_NO_MEMORY)."
        )
    elif not check_free or required + head_extra <= free:
        result["verdict"] = "fits"
        result["message"] = f"gmu {gmu} ({_gib(required)} of {of_node}) fits this {role}: {_gib(free)} free, {_gib(available)} available{held_text}."
    elif required + head_extra <= available:
        result["verdict"] = "fits_after_drop_caches"
        result["message"] = (
            f"gmu {gmu} needs {_gib(required + head_extra)} free on this {role} but only {_gib(free)} is{held_text}; "
            f"{_gib(cache)} is page cache, which the engine role drops right before launch (sync; echo 3 > /proc/sys/vm/drop_caches)."
        )
    else:
        result["verdict"] = "does_not_fit"
        largest = "; ".join(f"{name} (pid {pid}) {_gib(rss)}" for pid, name, rss in others)
        result["message"] = (
            f"gmu {gmu} needs {_gib(required + head_extra)} of {of_node} on this {role}, but only {_gib(available)} is available "
            f"even after dropping caches{held_text}: {_gib(others_bytes)} is held by other processes"
            + (f" (largest: {largest})" if largest else "")
            + ". Stop what uses the memory (a desktop session: sudo systemctl isolate multi-user.target; "
            f"a leftover engine: playbooks/stop.yml) or lower engine_gpu_memory_utilization to {result['recommended_gmu']}."
        )
    return result


def plan_discrete(gmu, gpus):
    """Judge gmu on discrete GPUs: gmu x each GPU's memory must fit in its free memory."""
    gmu = check_gmu(gmu)
    if not gpus or any(gpu.get("memory.total") is None or gpu.get("memory.free") is None for gpu in gpus):
        raise GpuMemoryError("nvidia-smi reports no memory for some GPU: this is unified memory, judge it with plan_unified.")
    total = min(gpu["memory.total"] for gpu in gpus)
    free = min(gpu["memory.free"] for gpu in gpus)
    required = gmu * total
    ceiling = min(GMU_CAP, free / total)
    result = {
        "memory": "discrete",
        "gpus": len(gpus),
        "total_bytes": int(total),
        "required_bytes": int(required),
        "gpu_free_bytes": int(free),
        "max_gmu": round(_floor(min(GMU_CAP, 1.0)), 3),
        "recommended_gmu": round(_floor(ceiling), 3),
    }
    if gmu > GMU_CAP or required > free:
        result["verdict"] = "does_not_fit"
        result["message"] = (
            f"gmu {gmu} asks for {_gib(required)} per GPU but the fullest GPU has {_gib(free)} free of {_gib(total)}. "
            f"Free the GPUs (nvidia-smi shows who holds them) or lower engine_gpu_memory_utilization to {result['recommended_gmu']}."
        )
    else:
        result["verdict"] = "fits"
        result["message"] = f"gmu {gmu} ({_gib(required)} per GPU) fits: {_gib(free)} free of {_gib(total)} on the fullest GPU."
    return result
