#!/usr/bin/python
# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Ansible module: will gmu x memory fit on this node now?"""

from __future__ import annotations

DOCUMENTATION = r"""
module: gmu_check
short_description: Check that vLLM's GPU memory utilization fits a node before launch
version_added: 0.1.0
description:
  - Reads C(/proc/meminfo), the cgroup memory limit and C(nvidia-smi --query-gpu) CSV, decides whether the
    node's GPU memory is unified (GB10, nvidia-smi reports memory as C([N/A])) or discrete, and judges
    I(gmu) against it - fits, fits after dropping caches, or does not fit - with a recommended maximum
    gmu for this node now.
  - Fails (unless I(report_only)) with a message that states the numbers and the fix.
  - Reads only; never changes the node. Supports check mode.
options:
  gmu:
    description: The engine's C(--gpu-memory-utilization).
    type: float
    required: true
  is_head:
    description: The node runs rank 0, whose API process needs I(head_reserve_gib) more than a worker.
    type: bool
    default: false
  head_reserve_gib:
    description: Memory the head's API process and EngineCore take beyond a worker (recipe, ~5 GB).
    type: float
    default: 5.0
  os_reserve_gib:
    description: Unified memory that must stay outside the engine for the OS (0.885 fits a stripped GB10 head, 0.89 does not).
    type: float
    default: 8.5
  check_free_memory:
    description:
      - Compare gmu x total with free and available memory, as vLLM does on start. Off for vLLM's CPU
        build, which sizes its KV cache from C(VLLM_CPU_KVCACHE_SPACE), not from gmu.
    type: bool
    default: true
  require_gpu:
    description: Fail when nvidia-smi is missing or answers with an error (the gb10 profile needs a GPU).
    type: bool
    default: true
  report_only:
    description: Return the verdict without failing.
    type: bool
    default: false
  nvidia_smi:
    description: The nvidia-smi command (a path, so tests can supply recorded outputs).
    type: str
    default: nvidia-smi
  meminfo_path:
    description: Where to read meminfo.
    type: path
    default: /proc/meminfo
  cgroup_memory_max_path:
    description: cgroup v2 memory limit file (v1's memory.limit_in_bytes works too); missing means no limit.
    type: path
    default: /sys/fs/cgroup/memory.max
author:
  - sparkfleet developers
"""

EXAMPLES = r"""
- name: Check gmu on every node before launch
  sparkfleet.vllm.gmu_check:
    gmu: "{{ engine_gpu_memory_utilization }}"
    is_head: "{{ sparkfleet_rank | int == 0 }}"

- name: Only report on a CPU engine (no GPU)
  sparkfleet.vllm.gmu_check:
    gmu: 0.85
    require_gpu: false
    check_free_memory: false
    report_only: true
"""

RETURN = r"""
memory:
  description: C(unified) (GB10, or a CPU engine) or C(discrete).
  returned: always
  type: str
  sample: unified
verdict:
  description: C(fits), C(fits_after_drop_caches) or C(does_not_fit).
  returned: always
  type: str
  sample: fits_after_drop_caches
total_bytes:
  description: Memory gmu is a fraction of (MemTotal or the cgroup limit on unified memory; the smallest GPU on discrete).
  returned: always
  type: int
  sample: 130663165952
required_bytes:
  description: gmu x total.
  returned: always
  type: int
  sample: 111063691059
mem_available_bytes:
  description: MemAvailable (unified memory).
  returned: when memory is unified
  type: int
  sample: 121411960832
mem_free_bytes:
  description: MemFree (unified memory).
  returned: when memory is unified
  type: int
  sample: 95000000000
page_cache_bytes:
  description: Page cache and reclaimable slab that dropping caches gives back.
  returned: when memory is unified
  type: int
  sample: 25000000000
headroom_bytes:
  description: What stays outside the engine for the OS once it runs (and, on the head, the API process).
  returned: when memory is unified
  type: int
  sample: 14232000000
max_gmu:
  description: The most gmu that can ever fit this node (reserves included), capped at 0.95.
  returned: always
  type: float
  sample: 0.885
recommended_gmu:
  description: The most gmu that fits this node now.
  returned: always
  type: float
  sample: 0.885
gpus:
  description: nvidia-smi's GPUs (name, memory fields in bytes or null when not reported).
  returned: always
  type: list
  elements: dict
  sample: [{"index": 0, "name": "NVIDIA GB10", "memory.total": null, "memory.free": null}]
message:
  description: The verdict in words, with the numbers and the fix.
  returned: always
  type: str
  sample: gmu 0.85 (103.4 GiB of 121.7 GiB) fits this worker
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkfleet.vllm.plugins.module_utils import gpu_memory, nvidia_smi

# The query of the GB10 recording in tests/data/gpu (memory fields print [N/A] there).
QUERY = ["index", "name", "memory.total", "memory.used", "memory.free"]


def read_gpus(module):
    """nvidia-smi's GPUs, or (None, reason) when there is no usable nvidia-smi."""
    binary = module.get_bin_path(module.params["nvidia_smi"]) if "/" not in module.params["nvidia_smi"] else module.params["nvidia_smi"]
    if not binary or not os.path.exists(binary):
        return None, f"{module.params['nvidia_smi']} not found"
    rc, out, err = module.run_command([binary, "--query-gpu=" + ",".join(QUERY), "--format=csv,noheader,nounits"])
    if rc != 0:
        return None, f"nvidia-smi failed ({rc}): {(err or out).strip()[:300]}"
    try:
        return nvidia_smi.parse_query_csv(out, fields=QUERY), None
    except nvidia_smi.NvidiaSmiError as error:
        return None, str(error)


def main():
    module = AnsibleModule(
        argument_spec={
            "gmu": {"type": "float", "required": True},
            "is_head": {"type": "bool", "default": False},
            "head_reserve_gib": {"type": "float", "default": 5.0},
            "os_reserve_gib": {"type": "float", "default": 8.5},
            "check_free_memory": {"type": "bool", "default": True},
            "require_gpu": {"type": "bool", "default": True},
            "report_only": {"type": "bool", "default": False},
            "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
            "meminfo_path": {"type": "path", "default": "/proc/meminfo"},
            "cgroup_memory_max_path": {"type": "path", "default": "/sys/fs/cgroup/memory.max"},
        },
        supports_check_mode=True,
    )
    params = module.params
    gpus, gpu_problem = read_gpus(module)
    if gpus is None and params["require_gpu"]:
        module.fail_json(
            msg=f"No GPU answers on this node: {gpu_problem}. Install the NVIDIA driver (the nvidia_driver role) "
            f"or, on a machine without GPUs, use profile: cpu.",
            gpus=[],
        )
    try:
        with open(params["meminfo_path"], encoding="ascii") as handle:
            meminfo = gpu_memory.parse_meminfo(handle.read())
        limit_text = None
        if os.path.exists(params["cgroup_memory_max_path"]):
            with open(params["cgroup_memory_max_path"], encoding="ascii") as handle:
                limit_text = handle.read()
        if gpus and not nvidia_smi.memory_is_unified(gpus):
            result = gpu_memory.plan_discrete(params["gmu"], gpus)
        else:
            result = gpu_memory.plan_unified(
                params["gmu"],
                meminfo,
                is_head=params["is_head"],
                head_reserve=params["head_reserve_gib"] * gpu_memory.GIB,
                os_reserve=params["os_reserve_gib"] * gpu_memory.GIB,
                limit=gpu_memory.cgroup_limit(limit_text),
                check_free=params["check_free_memory"],
            )
    except (OSError, ValueError) as error:
        module.fail_json(msg=f"gmu_check cannot judge this node: {error}", gpus=gpus or [])
    result["gpus"] = gpus or []
    if result["verdict"] == "does_not_fit" and not params["report_only"]:
        module.fail_json(msg=result.pop("message"), **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
