"""Predicted KV cache tokens vs the engine's own print, on the running simulated cluster; and
how long gmu_check takes to run.

1. Reads, from the head's engine container (docker exec into the node, then into the engine):
   config.json as the engine reads it, the engine's argv and environment, and its
   `CPU/GPU KV cache size` print; predicts with plugins/module_utils/kv_capacity.py and prints both
   (target: within 2%).
2. Runs the gmu_check module as Ansible runs it (a python process with its arguments file), on this
   machine's /proc/meminfo with the KV prediction on, 10 times, and prints the mean and the worst
   (target: under 1 s per node).

Usage: python benchmarks/kv_prediction.py [--node spark1] [--container vllm_glm53]
(make demo or make sim-up + site.yml first)
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "collections"))

from ansible_collections.sparkfleet.vllm.plugins.module_utils import kv_capacity  # noqa: E402


def in_engine(node: str, container: str, *argv: str) -> str:
    return subprocess.run(["docker", "exec", node, "docker", *argv], check=True, capture_output=True, text=True).stdout


def flag(args: list[str], name: str, default=None):
    return args[args.index(name) + 1] if name in args else default


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--node", default="spark1", help="the head's node container")
    parser.add_argument("--container", default="vllm_glm53", help="the engine container on it")
    args = parser.parse_args()

    inspect = json.loads(in_engine(args.node, args.container, "inspect", args.container))[0]
    argv = inspect["Args"]
    env = dict(item.split("=", 1) for item in inspect["Config"]["Env"])
    model_path = argv[argv.index("serve") + 1] if "serve" in argv else "/model"
    config = json.loads(in_engine(args.node, args.container, "exec", args.container, "cat", f"{model_path}/config.json"))
    log = subprocess.run(["docker", "exec", args.node, "docker", "logs", args.container], capture_output=True, text=True, check=False).stdout
    log += subprocess.run(["docker", "exec", args.node, "docker", "logs", args.container], capture_output=True, text=True, check=False).stderr
    actual = kv_capacity.parse_engine_kv(log)

    tp = int(flag(argv, "--tensor-parallel-size", 1))
    layout = kv_capacity.kv_layout(config, tp, flag(argv, "--kv-cache-dtype", "auto"), flag(argv, "--dtype", "auto"))
    memory, source, _estimate = kv_capacity.kv_memory_per_rank(
        cpu_kvcache_space_gib=float(env["VLLM_CPU_KVCACHE_SPACE"]) if "VLLM_CPU_KVCACHE_SPACE" in env else None,
        kv_cache_memory_bytes=int(flag(argv, "--kv-cache-memory-bytes", 0)) or None,
    )
    block = flag(argv, "--block-size")
    predicted = kv_capacity.predict(layout, memory, int(block) if block else None)
    print(f"engine on {args.node}: {config.get('architectures')} TP {tp}, {source}")
    print(f"  arithmetic: {layout['arithmetic']}")
    print(f"  predicted KV tokens per rank: {predicted:,}")
    if not actual:
        print("  the engine's log has no KV cache size line (is it up?)")
        return 1
    result = kv_capacity.compare(predicted, actual["tokens"])
    print(f"  engine's own print:           {actual['tokens']:,} ({actual['device']})")
    print(f"  predicted / printed = {result['ratio']:.5f} (target within 2%: {'met' if result['within_2_percent'] else 'NOT met'})")
    lane_len, seqs = int(flag(argv, "--max-model-len", 0)), int(flag(argv, "--max-num-seqs", 0))
    if lane_len and seqs:
        fit = kv_capacity.lane_fit(predicted, lane_len, seqs)
        print(
            f"  lane {seqs} x {lane_len:,}: {fit['max_full_length_concurrency']:.2f} full-length sequences fit, oversubscription {fit['oversubscription']:.3f}x"
        )

    # gmu_check's own cost, as Ansible runs it (python + the module + its arguments).
    with tempfile.TemporaryDirectory() as work:
        args_file = pathlib.Path(work) / "args.json"
        params = {
            "gmu": 0.85,
            "require_gpu": False,
            "check_free_memory": False,
            "report_only": True,
            "model_config": config,
            "tensor_parallel_size": tp,
            "cpu_kvcache_space_gib": 1.0,
            "max_model_len": lane_len or 500000,
            "max_num_seqs": seqs or 5,
            "engine_log": log[-20000:],
        }
        args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": params}))
        environment = dict(os.environ, PYTHONPATH=str(ROOT / "collections"))
        times = []
        for _unused in range(10):
            start = time.perf_counter()
            subprocess.run([sys.executable, str(ROOT / "plugins/modules/gmu_check.py"), str(args_file)], check=True, capture_output=True, env=environment)
            times.append(time.perf_counter() - start)
    print(f"gmu_check run 10 times (process start included): mean {sum(times) / len(times):.3f} s, worst {max(times):.3f} s (target under 1 s per node)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
