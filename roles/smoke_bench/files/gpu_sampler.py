"""Sample the GPU every INTERVAL seconds while the smoke benchmark streams (the smoke_bench role starts one per node).

    gpu_sampler.py NVIDIA_SMI QUERY INTERVAL_S OUT STOP MAX_S

Appends nvidia-smi's CSV answer to QUERY (no header, no units) to OUT until the file STOP exists or MAX_S seconds
have passed. A failed nvidia-smi call is skipped: the report says how many samples each node gave.
"""

import os
import subprocess
import sys
import time


def main(nvidia_smi, query, interval_s, out, stop, max_s):
    deadline = time.monotonic() + float(max_s)
    with open(out, "a", encoding="utf-8") as kept:
        while not os.path.exists(stop) and time.monotonic() < deadline:
            try:
                answer = subprocess.run([nvidia_smi, f"--query-gpu={query}", "--format=csv,noheader,nounits"], capture_output=True, text=True, check=False)
            except OSError as error:  # no nvidia-smi here: no sample, said once
                sys.stderr.write(f"gpu_sampler: {nvidia_smi}: {error}\n")
                return 0
            if answer.returncode == 0:
                kept.write(answer.stdout)
                kept.flush()
            time.sleep(float(interval_s))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
