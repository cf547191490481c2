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
  - Reads C(/proc/meminfo), its memory cgroup and C(nvidia-smi --query-gpu) CSV, decides whether the
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
  cgroup_root:
    description:
      - Where the cgroup filesystems are mounted. The module finds its own memory cgroup (v1 or v2) from
        C(/proc/self/cgroup). When that cgroup or a parent has a limit below MemTotal, the node's memory is
        that limit (a container, a systemd slice with C(MemoryMax=), a simulated node), and what is
        available is the limit less the cgroup's use plus its reclaimable file pages.
    type: path
    default: /sys/fs/cgroup
  proc_path:
    description: Where procfs is mounted (tests point it at a recorded tree).
    type: path
    default: /proc
  engine_rank_pid:
    description:
      - PID (on this node) of the running rank of this same engine, when one runs. Its memory (its cgroup's
        use, and at least I(engine_rank_gmu) x the node's memory on unified memory, plus on the head what its API
        server and EngineCore hold beside it, up to I(head_reserve_gib)) counts as available, since a relaunch stops
        it before the new rank takes any. Memory held by anything else does not count.
      - Leave unset for a node whose rank is not running, or runs another engine.
    type: int
  engine_rank_gmu:
    description: The C(--gpu-memory-utilization) the running rank was started with (see I(engine_rank_pid)).
    type: float
  model_config:
    description:
      - The model's C(config.json), parsed. With it the module predicts the engine's KV cache tokens per
        rank (standard attention split or replicated over TP, MLA latent on every rank, the sparse-MLA
        indexer), the lane's full-length concurrency and oversubscription. Unknown architectures are
        named and skipped; memory is still checked.
    type: dict
  model_config_path:
    description: Read I(model_config) from this file on the node (e.g. the weights directory's config.json).
    type: path
  tensor_parallel_size:
    description: TP size of the engine.
    type: int
    default: 1
  kv_cache_dtype:
    description: The engine's C(--kv-cache-dtype) (C(auto) means I(model_dtype)).
    type: str
    default: auto
  model_dtype:
    description: The engine's C(--dtype) (C(auto) means config.json's torch_dtype).
    type: str
    default: auto
  block_size:
    description: The engine's C(--block-size); the prediction is rounded down to whole blocks.
    type: int
  speculative_mtp:
    description: MTP speculative decoding is on (its C(num_nextn_predict_layers) hold KV too).
    type: bool
    default: false
  kv_cache_memory_bytes:
    description: The engine's C(--kv-cache-memory-bytes), when set.
    type: int
  cpu_kvcache_space_gib:
    description: C(VLLM_CPU_KVCACHE_SPACE) of vLLM's CPU build.
    type: float
  weights_dir:
    description: Directory of the weights; their size / TP is the weights per rank in the gmu estimate.
    type: path
  non_kv_reserve_gib:
    description: Memory a rank needs besides weights and KV (activations, CUDA graphs) in the gmu estimate.
    type: float
    default: 4.0
  max_model_len:
    description: The lane's max_model_len.
    type: int
  max_num_seqs:
    description: The lane's max_num_seqs.
    type: int
  max_oversubscription:
    description: Occupancy (max_num_seqs x max_model_len) / predicted KV tokens above which the module warns.
    type: float
    default: 1.5
  fail_on_oversubscription:
    description: Fail instead of warning above I(max_oversubscription).
    type: bool
    default: false
  engine_log:
    description: The engine's log (or its KV lines); its C(KV cache size) print is compared with the prediction.
    type: str
extends_documentation_fragment:
  - sparkfleet.vllm.attributes
  - sparkfleet.vllm.attributes.READ_ONLY
author:
  - sparkfleet developers (@sparkfleet)
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
engine_held_bytes:
  description: Memory this engine's own running rank holds on the node, counted as available (see I(engine_rank_pid)).
  returned: when memory is unified
  type: int
  sample: 111063691059
others_bytes:
  description: Memory of the node held by anything but this engine's rank (the OS, a desktop, a foreign job).
  returned: when memory is unified
  type: int
  sample: 8589934592
cgroup_limited:
  description: The node's memory is its memory cgroup's limit, not MemTotal.
  returned: when memory is unified
  type: bool
  sample: false
mem_available_bytes:
  description: MemAvailable (unified memory; within the cgroup's limit when it has one), this engine's rank included.
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
driver_version:
  description: The loaded NVIDIA driver's version (nvidia-smi's driver_version), null where no GPU answers.
  returned: always
  type: str
  sample: "580.126.09"
kv:
  description:
    - KV capacity, when a model config was given. C(skipped) says why there is no prediction. Otherwise the
      layout (C(kind), C(bytes_per_token), C(arithmetic)), C(kv_memory_bytes) and how it was found
      (C(estimate) when derived from gmu), C(predicted_tokens), C(max_full_length_concurrency),
      C(oversubscription) and, with I(engine_log), C(actual_tokens), C(ratio) and C(within_2_percent).
  returned: when model_config or model_config_path is set
  type: dict
  sample: {"kind": "attention", "bytes_per_token": 256, "predicted_tokens": 4194304, "actual_tokens": 4193498, "ratio": 1.0002}
advice:
  description: What the operator should know but need not stop for (swap off, KV prediction skipped, an oversubscribed lane); also shown as warnings.
  returned: always
  type: list
  elements: str
message:
  description: The verdict in words, with the numbers and the fix.
  returned: always
  type: str
  sample: gmu 0.85 (103.4 GiB of 121.7 GiB) fits this worker
"""

import glob
import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkfleet.vllm.plugins.module_utils import gpu_memory, kv_capacity, node_memory, nvidia_smi

# The query of the GB10 recording in tests/data/gpu (memory fields print [N/A] there).
QUERY = ["index", "name", "memory.total", "memory.used", "memory.free"]


def nvidia_smi_path(module):
    """The nvidia-smi to run (a name is looked up on PATH), or None where there is none."""
    name = module.params["nvidia_smi"]
    binary = module.get_bin_path(name) if "/" not in name else name
    return binary if binary and os.path.exists(binary) else None


def read_driver_version(module):
    """The loaded NVIDIA driver's version (rank parity attests it), or None without a usable nvidia-smi."""
    binary = nvidia_smi_path(module)
    if not binary:
        return None
    rc, out = module.run_command([binary, "--query-gpu=driver_version", "--format=csv,noheader"])[:2]
    versions = {line.strip() for line in out.splitlines() if line.strip()} if rc == 0 else set()
    # One version per node; anything else (an old nvidia-smi printing a table) is not a version.
    return versions.pop() if len(versions) == 1 and all(part.isdigit() for part in next(iter(versions)).split(".")) else None


def read_gpus(module):
    """nvidia-smi's GPUs, or (None, reason) when there is no usable nvidia-smi."""
    binary = nvidia_smi_path(module)
    if not binary:
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
            "cgroup_root": {"type": "path", "default": "/sys/fs/cgroup"},
            "proc_path": {"type": "path", "default": "/proc"},
            "engine_rank_pid": {"type": "int"},
            "engine_rank_gmu": {"type": "float"},
            "model_config": {"type": "dict"},
            "model_config_path": {"type": "path"},
            "tensor_parallel_size": {"type": "int", "default": 1},
            "kv_cache_dtype": {"type": "str", "default": "auto"},
            "model_dtype": {"type": "str", "default": "auto"},
            "block_size": {"type": "int"},
            "speculative_mtp": {"type": "bool", "default": False},
            "kv_cache_memory_bytes": {"type": "int"},
            "cpu_kvcache_space_gib": {"type": "float"},
            "weights_dir": {"type": "path"},
            "non_kv_reserve_gib": {"type": "float", "default": 4.0},
            "max_model_len": {"type": "int"},
            "max_num_seqs": {"type": "int"},
            "max_oversubscription": {"type": "float", "default": 1.5},
            "fail_on_oversubscription": {"type": "bool", "default": False},
            "engine_log": {"type": "str"},
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
        view, held, others = read_node_memory(params, meminfo)
        if gpus and not nvidia_smi.memory_is_unified(gpus):
            result = gpu_memory.plan_discrete(params["gmu"], gpus)
        else:
            result = gpu_memory.plan_unified(
                params["gmu"],
                view,
                is_head=params["is_head"],
                head_reserve=params["head_reserve_gib"] * gpu_memory.GIB,
                os_reserve=params["os_reserve_gib"] * gpu_memory.GIB,
                check_free=params["check_free_memory"],
                engine_held=held,
                others=others,
            )
            result["cgroup_limited"] = view["limited"]
    except (OSError, ValueError) as error:
        module.fail_json(msg=f"gmu_check cannot judge this node: {error}", gpus=gpus or [])
    result["gpus"] = gpus or []
    result["driver_version"] = read_driver_version(module) if gpus else None
    if params["model_config"] is not None or params["model_config_path"]:
        result["kv"] = kv_report(params, result["total_bytes"])
        if result["kv"].get("warning"):
            result.setdefault("advice", []).append(result["kv"]["warning"])
    for advice in result.setdefault("advice", []):
        module.warn(advice)
    if result["verdict"] == "does_not_fit" and not params["report_only"]:
        module.fail_json(msg=result.pop("message"), **result)
    if result.get("kv", {}).get("oversubscribed") and params["fail_on_oversubscription"] and not params["report_only"]:
        module.fail_json(msg=result["kv"]["warning"], **result)
    module.exit_json(changed=False, **result)


def read_node_memory(params, meminfo):
    """(the node's memory view, bytes the engine's own rank holds, the largest other processes)."""
    proc, root = params["proc_path"], params["cgroup_root"]
    own = node_memory.memory_cgroup(node_memory.read_text(f"{proc}/self/cgroup") or "")
    view = node_memory.node_view(meminfo, node_memory.cgroup_usage(own, node_memory.read_text, root) if own else None)
    held, engine_pids = 0, set()
    if params["engine_rank_pid"]:
        rank = node_memory.memory_cgroup(node_memory.read_text(f"{proc}/{params['engine_rank_pid']}/cgroup") or "")
        usage = node_memory.cgroup_usage(rank, node_memory.read_text, root) if rank else None
        if rank and rank != own:
            engine_pids = node_memory.cgroup_pids(rank, node_memory.read_text, root)
        engine_pids.add(params["engine_rank_pid"])
        # The head's API server and EngineCore hold up to the head reserve beside the GPU's share.
        process_cap = int(params["head_reserve_gib"] * gpu_memory.GIB) if params["is_head"] else 0
        held = node_memory.engine_held(usage and usage["usage"] - usage["reclaimable"], params["engine_rank_gmu"], view["MemTotal"], process_cap)
    others = node_memory.largest_processes(node_memory.list_processes(proc), exclude_pids=engine_pids | {os.getpid()})
    return view, held, others


def weights_bytes(directory):
    return sum(os.path.getsize(path) for path in glob.glob(os.path.join(directory, "*.safetensors")))


def kv_report(params, total_bytes):
    """Predicted KV tokens (and the engine's own figure when its log is given); never raises."""
    config = params["model_config"]
    try:
        if config is None:
            with open(params["model_config_path"], encoding="utf-8") as handle:
                config = json.load(handle)
    except (OSError, ValueError) as error:
        return {"skipped": f"no model config to predict KV from: {error}", "warning": f"KV prediction skipped: {error}"}
    tp = params["tensor_parallel_size"]
    try:
        mtp_layers = int(kv_capacity.text_config(config).get("num_nextn_predict_layers") or 1) if params["speculative_mtp"] else 0
        layout = kv_capacity.kv_layout(config, tp, params["kv_cache_dtype"], params["model_dtype"], mtp_layers)
        weights = weights_bytes(params["weights_dir"]) // tp if params["weights_dir"] and os.path.isdir(params["weights_dir"]) else None
        memory, source, estimate = kv_capacity.kv_memory_per_rank(
            cpu_kvcache_space_gib=params["cpu_kvcache_space_gib"],
            kv_cache_memory_bytes=params["kv_cache_memory_bytes"],
            gmu=params["gmu"],
            total_bytes=total_bytes,
            weights_per_rank_bytes=weights,
            non_kv_reserve_bytes=int(params["non_kv_reserve_gib"] * gpu_memory.GIB),
        )
    except kv_capacity.KvCapacityError as error:
        return {"skipped": str(error), "warning": f"KV prediction skipped: {error}"}
    predicted = kv_capacity.predict(layout, memory, params["block_size"])
    report = dict(layout, kv_memory_bytes=int(memory), kv_memory_source=source, estimate=estimate or layout["approximate"], predicted_tokens=predicted)
    words = [f"predicted {predicted:,} KV tokens per rank ({layout['arithmetic']}; {source})"]
    if params["max_model_len"] and params["max_num_seqs"]:
        fit = kv_capacity.lane_fit(predicted, params["max_model_len"], params["max_num_seqs"])
        report.update(fit)
        words.append(
            f"lane {params['max_num_seqs']} x {params['max_model_len']:,} = {fit['occupancy_tokens']:,} tokens,"
            f" {fit['max_full_length_concurrency']:.2f} full-length sequences fit"
            + (f", oversubscribed {fit['oversubscription']:.2f}x" if fit["oversubscription"] and fit["oversubscription"] > 1 else "")
        )
        if fit["oversubscription"] and fit["oversubscription"] > params["max_oversubscription"]:
            report["oversubscribed"] = True
            report["warning"] = (
                f"The lane asks for {fit['occupancy_tokens']:,} tokens of KV and about {predicted:,} fit:"
                f" {fit['oversubscription']:.2f}x, above max_oversubscription {params['max_oversubscription']}."
                f" Lower max_num_seqs to {max(1, int(predicted // params['max_model_len']))} or use a shorter lane."
            )
    actual = kv_capacity.parse_engine_kv(params["engine_log"]) if params["engine_log"] else None
    if actual:
        report.update(kv_capacity.compare(predicted, actual["tokens"]))
        report["engine_print"] = actual
        words.append(f"the engine printed {actual['tokens']:,} ({report['ratio']:.4f} of it predicted)")
    elif params["engine_log"] is not None:
        words.append("the engine's log has no KV cache size line yet")
    report["message"] = "; ".join(words)
    return report


if __name__ == "__main__":
    main()
