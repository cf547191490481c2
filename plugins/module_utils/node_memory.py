# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""What memory a node really has for the engine: its memory cgroup and who holds what.

A process sees the host's /proc/meminfo even when it lives in a memory cgroup
(a container, a systemd slice with MemoryMax=, a simulated node). The memory
the engine can take is the cgroup's: its limit, minus what the cgroup uses,
plus the file pages the kernel would reclaim. And on a serving node most of
that use is the engine's own rank, which a relaunch frees first.

Every function takes text or a reader, so it is tested without a host.
Pure Python, no Ansible imports.
"""

from __future__ import annotations

import os

UNLIMITED = 1 << 60  # cgroup v1 writes "unlimited" as a number near 2**63


def memory_cgroup(proc_cgroup_text):
    """/proc/PID/cgroup -> ("v1", path) for the memory controller, ("v2", path), or None."""
    v2 = None
    for line in proc_cgroup_text.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if "memory" in controllers.split(","):
            return ("v1", path)
        if hierarchy == "0" and controllers == "":
            v2 = ("v2", path)
    return v2


def parse_stat(text):
    """memory.stat -> {key: int}."""
    stat = {}
    for line in (text or "").splitlines():
        key, _unused, value = line.partition(" ")
        if value.strip().isdigit():
            stat[key] = int(value)
    return stat


def cgroup_number(text):
    """A cgroup file's byte count (memory.max, limit_in_bytes, usage...), or None for "max"/unlimited/absent."""
    if text is None:
        return None
    text = text.strip()
    if not text or text == "max":
        return None
    value = int(text)
    return None if value >= UNLIMITED else value


def cgroup_usage(cgroup, read, root="/sys/fs/cgroup"):
    """A cgroup's memory: {limit, usage, reclaimable} in bytes (limit None when unlimited).

    reclaimable is the cgroup's file pages, active or not: what a drop_caches gives back (the
    engine role drops caches right before a launch). After an image build a node holds GBs of
    them, all counted in usage.

    read(path) returns a file's text or None. v1 takes the limit from memory.stat's
    hierarchical_memory_limit (a parent's limit counts: the simulated node limits the
    engine's container from above); v2 walks memory.max up to the root.
    """
    version, path = cgroup
    path = "/" + path.strip("/") if path.strip("/") else ""
    if version == "v1":
        base = f"{root}/memory{path}"
        stat = parse_stat(read(f"{base}/memory.stat"))
        usage = cgroup_number(read(f"{base}/memory.usage_in_bytes"))
        limit_text = str(stat["hierarchical_memory_limit"]) if "hierarchical_memory_limit" in stat else read(f"{base}/memory.limit_in_bytes")
        limit = cgroup_number(limit_text)
        reclaimable = stat.get("total_active_file", 0) + stat.get("total_inactive_file", 0)
    else:
        base = f"{root}{path}"
        stat = parse_stat(read(f"{base}/memory.stat"))
        usage = cgroup_number(read(f"{base}/memory.current"))
        limit = None
        walk = path
        while True:
            value = cgroup_number(read(f"{root}{walk}/memory.max"))
            if value is not None:
                limit = value if limit is None else min(limit, value)
            if not walk:
                break
            walk = walk.rsplit("/", 1)[0]
        reclaimable = stat.get("active_file", 0) + stat.get("inactive_file", 0)
    if usage is None:
        return None
    return {"limit": limit, "usage": usage, "reclaimable": min(reclaimable, usage)}


def node_view(meminfo, cgroup=None):
    """The node's memory as the engine meets it: /proc/meminfo, bounded by the cgroup when it has a limit.

    Returns a meminfo-shaped dict (bytes) for gpu_memory.plan_unified, with "limited" saying whether
    the cgroup bounded it.
    """
    view = dict(meminfo)
    view["limited"] = False
    if not cgroup or cgroup.get("limit") is None or cgroup["limit"] >= meminfo["MemTotal"]:
        return view
    limit, usage, reclaimable = cgroup["limit"], cgroup["usage"], cgroup["reclaimable"]
    host_available = meminfo.get("MemAvailable", meminfo.get("MemFree", 0))
    host_free = meminfo.get("MemFree", host_available)
    view.update(
        {
            "MemTotal": limit,
            "MemAvailable": max(0, min(host_available, limit - usage + reclaimable)),
            "MemFree": max(0, min(host_free, limit - usage)),
            # Page cache the engine role's drop_caches would give back, as this cgroup sees it.
            "Cached": reclaimable,
            "Buffers": 0,
            "SReclaimable": 0,
            "Shmem": 0,
            "limited": True,
        }
    )
    return view


def engine_held(rank_usage_bytes=None, rank_gmu=None, total_bytes=None, process_bytes_cap=0):
    """Memory this node's running rank holds: what a relaunch frees before the new rank takes any.

    The rank's cgroup counts its processes' memory (on the CPU build, the KV cache too). On a GB10
    the GPU's allocations come out of the same unified memory but may not be charged to the
    container's cgroup, so the rank holds at least the gmu share it was started with, plus what its
    own processes hold beside it: the head's API server and EngineCore (~5 GB, the head reserve),
    passed as process_bytes_cap. The cgroup's use counts toward that share only up to the cap, so
    bytes the cgroup already charges for the GPU are never counted twice (which would pass a node
    that cannot fit).
    """
    usage = max(0, rank_usage_bytes or 0)
    held = usage
    if rank_gmu and total_bytes:
        held = max(held, int(float(rank_gmu) * total_bytes) + min(usage, max(0, int(process_bytes_cap or 0))))
    return held


def largest_processes(processes, exclude_pids=(), count=3, min_bytes=64 * 1024**2):
    """[(pid, name, rss_bytes)] -> the `count` largest outside exclude_pids (of min_bytes or more), largest first."""
    excluded = set(exclude_pids)
    others = [p for p in processes if p[0] not in excluded and p[2] >= min_bytes]
    return sorted(others, key=lambda p: -p[2])[:count]


def read_text(path):
    """A file's text, or None when it is absent or unreadable (a reader for cgroup_usage)."""
    try:
        with open(path, encoding="ascii") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


def list_processes(proc="/proc"):
    """[(pid, name, rss_bytes)] of every process this node shows (reads /proc/PID/status)."""
    found = []
    try:
        entries = os.listdir(proc)
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        text = read_text(f"{proc}/{entry}/status")
        if not text:
            continue
        fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        rss = fields.get("VmRSS", "0 kB").split()
        found.append((int(entry), fields.get("Name", "?").strip(), int(rss[0]) * 1024 if rss and rss[0].isdigit() else 0))
    return found


def cgroup_pids(cgroup, read, root="/sys/fs/cgroup"):
    """Every PID in a cgroup and its descendants (cgroup.procs), for telling the engine's processes apart."""
    version, path = cgroup
    base = f"{root}/memory{path}" if version == "v1" else f"{root}{path}"
    pids = set()
    for directory, _dirs, files in os.walk(base):
        if "cgroup.procs" in files:
            pids.update(int(pid) for pid in (read(f"{directory}/cgroup.procs") or "").split() if pid.isdigit())
    return pids
