"""A node's memory cgroup read from recorded cgroup/proc text: v1 (the simulated nodes, this machine) and v2."""

from __future__ import annotations

from ansible_collections.sparkfleet.vllm.plugins.module_utils import node_memory as nm

GIB = 1024**3
V1_SELF = "9:name=systemd:/docker/abc\n4:memory:/docker/abc\n0::/docker/abc\n"  # a simulated node (cgroupns host)
V2_SELF = "0::/system.slice/engine.service\n"


def reader(files):
    return files.get


def test_the_memory_cgroup_is_found_in_v1_and_v2():
    assert nm.memory_cgroup(V1_SELF) == ("v1", "/docker/abc")
    assert nm.memory_cgroup(V2_SELF) == ("v2", "/system.slice/engine.service")
    assert nm.memory_cgroup("") is None


def test_v1_limit_comes_from_the_hierarchy():
    files = {
        "/sys/fs/cgroup/memory/docker/abc/memory.stat": (
            f"cache 10\nhierarchical_memory_limit {int(4.5 * GIB)}\ntotal_active_file {GIB // 8}\ntotal_inactive_file {GIB // 8}\n"
        ),
        "/sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes": f"{4 * GIB}\n",
    }
    usage = nm.cgroup_usage(("v1", "/docker/abc"), reader(files))
    assert usage == {"limit": int(4.5 * GIB), "usage": 4 * GIB, "reclaimable": GIB // 4}


def test_v1_unlimited_and_v2_parent_limit():
    files = {
        "/sys/fs/cgroup/memory/memory.stat": "hierarchical_memory_limit 9223372036854771712\n",
        "/sys/fs/cgroup/memory/memory.usage_in_bytes": "100\n",
    }
    assert nm.cgroup_usage(("v1", "/"), reader(files))["limit"] is None
    files = {
        "/sys/fs/cgroup/system.slice/engine.service/memory.current": f"{GIB}\n",
        "/sys/fs/cgroup/system.slice/engine.service/memory.max": "max\n",
        "/sys/fs/cgroup/system.slice/engine.service/memory.stat": "inactive_file 0\n",
        "/sys/fs/cgroup/system.slice/memory.max": f"{8 * GIB}\n",
    }
    assert nm.cgroup_usage(("v2", "/system.slice/engine.service"), reader(files))["limit"] == 8 * GIB


def test_node_view_is_bounded_by_the_limit():
    host = {"MemTotal": 24 * GIB, "MemAvailable": 20 * GIB, "MemFree": 18 * GIB}
    view = nm.node_view(host, {"limit": int(4.5 * GIB), "usage": 4 * GIB, "reclaimable": GIB // 2})
    assert view["limited"] is True
    assert view["MemTotal"] == int(4.5 * GIB)
    assert view["MemAvailable"] == GIB  # 4.5 - 4 + 0.5
    assert view["MemFree"] == GIB // 2
    # No limit, or a limit above the host: the host's own numbers.
    assert nm.node_view(host, None)["MemTotal"] == 24 * GIB
    assert nm.node_view(host, {"limit": 64 * GIB, "usage": 1, "reclaimable": 0})["limited"] is False


def test_engine_held_takes_the_larger_of_cgroup_use_and_gmu_share_never_the_sum():
    total = 121 * GIB
    assert nm.engine_held(3 * GIB) == 3 * GIB  # CPU rank: its cgroup holds the KV too
    assert nm.engine_held(4 * GIB, 0.85, total) == int(0.85 * total)  # GB10 worker: GPU memory may not be charged
    assert nm.engine_held(None, None, None) == 0


def test_the_heads_own_processes_count_beside_its_gpu_share_up_to_the_head_reserve():
    """The GB10 head: API server and EngineCore (~5 GB) in the rank's cgroup, the GPU's share perhaps not."""
    total, cap = 121 * GIB, 5 * GIB
    assert nm.engine_held(4 * GIB, 0.85, total, cap) == int(0.85 * total) + 4 * GIB
    assert nm.engine_held(7 * GIB, 0.85, total, cap) == int(0.85 * total) + cap  # never more than the cap beside it
    # Where the cgroup does charge the GPU's share, its use already holds it all: nothing counted twice.
    charged = int(0.85 * total) + 5 * GIB
    assert nm.engine_held(charged, 0.85, total, cap) == charged


def test_largest_processes_leave_the_engine_out():
    procs = [(1, "dockerd", GIB // 8), (400, "vllm", 5 * GIB), (500, "hog", GIB), (501, "bash", 2 * 1024**2)]
    assert nm.largest_processes(procs, exclude_pids={400}) == [(500, "hog", GIB), (1, "dockerd", GIB // 8)]  # bash: too small to name
