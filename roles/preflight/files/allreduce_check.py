"""All-reduce across the engine's nodes, run with the engine image: one process per node.

Proves that every rank reaches the others over the fabric with the engine's own torch and
communication library (NCCL on GPUs, gloo on the CPU build), checks the sum, and measures bus
bandwidth as nccl-tests defines it: algbw x 2(n-1)/n, algbw = bytes / time per all-reduce.
Rank 0 prints one JSON line. Passed to `python -c` by the preflight role (nothing is written
on the nodes); stdlib and torch only.
"""

import argparse
import datetime
import json
import socket
import sys
import time

import torch
import torch.distributed as dist


def main(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=["gloo", "nccl"], required=True)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world-size", type=int, required=True)
    parser.add_argument("--master-addr", required=True)
    parser.add_argument("--master-port", type=int, required=True)
    parser.add_argument("--size-mb", type=float, default=64)
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--timeout-s", type=int, default=120)
    args = parser.parse_args(argv)

    try:
        dist.init_process_group(
            args.backend,
            init_method=f"tcp://{args.master_addr}:{args.master_port}",
            rank=args.rank,
            world_size=args.world_size,
            timeout=datetime.timedelta(seconds=args.timeout_s),
        )
    except (RuntimeError, OSError) as error:  # torch's DistStoreError / DistNetworkError derive from RuntimeError
        # torch says "wait timeout after 20000ms, keys: /default_pg/0//cuda//0" or a socket error:
        # say which rank could not join whom, and what to check.
        reason = str(error).strip().splitlines()[0][:300] if str(error).strip() else type(error).__name__
        message = (
            f"rank {args.rank} of {args.world_size} could not join the all-reduce at "
            f"{args.master_addr}:{args.master_port} within {args.timeout_s} s ({type(error).__name__}: {reason}). "
            "Every rank must be given the same master address and port, the head must be reachable on that port "
            "over the fabric, and every rank must start within the timeout."
        )
        print(json.dumps({"error": message, "rank": args.rank}))
        print(message, file=sys.stderr)
        return 3
    device = torch.device("cuda", 0) if args.backend == "nccl" else torch.device("cpu")
    elements = int(args.size_mb * 1024 * 1024 // 4)
    data = torch.ones(elements, dtype=torch.float32, device=device)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    dist.all_reduce(data)  # warm-up: connections, buffers
    sync()
    dist.barrier()
    start = time.perf_counter()
    for _unused in range(args.iterations):
        dist.all_reduce(data)
    sync()
    seconds = (time.perf_counter() - start) / args.iterations

    # Correctness: every rank contributes rank + 1; the sum is n(n+1)/2 everywhere.
    check = torch.full((1024,), float(args.rank + 1), device=device)
    dist.all_reduce(check)
    expected = args.world_size * (args.world_size + 1) / 2
    correct = bool(torch.all(check == expected).item())
    hosts = [None] * args.world_size
    dist.all_gather_object(hosts, socket.gethostname())
    if args.rank == 0:
        size = elements * 4
        algbw = size / seconds / 1e9
        print(json.dumps({
            "ranks": args.world_size,
            "hosts": hosts,
            "backend": args.backend,
            "bytes": size,
            "seconds_per_allreduce": round(seconds, 6),
            "algbw_gbs": round(algbw, 4),
            "busbw_gbs": round(algbw * 2 * (args.world_size - 1) / args.world_size, 4),
            "correct": correct,
            "torch": torch.__version__,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())) if args.backend == "nccl" else None,
        }))  # fmt: skip
    dist.destroy_process_group()
    return 0 if correct else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
