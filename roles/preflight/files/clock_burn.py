"""The recipe's clock-wedge check, run with the engine image on a GPU node: a bf16 8192x8192 matmul
burn for a few seconds, then the SM clock nvidia-smi reports while the GPU is still loaded. A GB10
can sit at ~660 MHz in P0; one wedged rank gates the whole TP group. Prints one JSON line.
Passed to `python -c` by the preflight role; stdlib and torch only.
"""

import argparse
import json
import subprocess
import sys
import time

import torch


def sm_clock_mhz() -> int:
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=clocks.current.sm", "--format=csv,noheader,nounits", "--id=0"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return int(out.strip().splitlines()[0])


def main(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--size", type=int, default=8192)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA device in the container: run it with --gpus all on a GPU node"}))
        return 2
    a = torch.randn(args.size, args.size, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(args.size, args.size, dtype=torch.bfloat16, device="cuda")
    end, iterations, busy = time.monotonic() + args.seconds, 0, 0.0
    clocks = []
    while time.monotonic() < end:
        started = time.perf_counter()
        for _unused in range(8):
            a = (a @ b).clamp_(-1, 1)
        torch.cuda.synchronize()
        busy += time.perf_counter() - started
        iterations += 8
        clocks.append(sm_clock_mhz())  # sampled under load, as the recipe reads it
    # Only the products' own time: the nvidia-smi calls between them are not GPU work
    # (dividing by the planned seconds read 260 TFLOPS on an H200 that does ~790).
    tflops = 2 * args.size**3 * iterations / busy / 1e12
    print(json.dumps({"sm_clock_mhz": clocks[-1], "sm_clock_min_mhz": min(clocks), "tflops": round(tflops, 1), "device": torch.cuda.get_device_name(0)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
