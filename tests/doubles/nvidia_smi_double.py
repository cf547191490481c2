#!/usr/bin/env python3
"""TEST DOUBLE for nvidia-smi (no GPU on the build machines).

Prints a recorded real output instead of asking a GPU: the file named by
NVIDIA_SMI_DOUBLE_OUTPUT, or exits with NVIDIA_SMI_DOUBLE_RC and a message
(as nvidia-smi does when the driver is missing or mismatched).
"""

import os
import sys

rc = int(os.environ.get("NVIDIA_SMI_DOUBLE_RC", "0"))
if rc:
    sys.stderr.write("Failed to initialize NVML: Driver/library version mismatch\n")
    sys.exit(rc)
# A driver_version query answers from its own recording where one is given (NVIDIA_SMI_DOUBLE_DRIVER_OUTPUT).
output = os.environ["NVIDIA_SMI_DOUBLE_OUTPUT"]
if "--query-gpu=driver_version" in sys.argv[1:] and os.environ.get("NVIDIA_SMI_DOUBLE_DRIVER_OUTPUT"):
    output = os.environ["NVIDIA_SMI_DOUBLE_DRIVER_OUTPUT"]
with open(output, encoding="utf-8") as handle:
    sys.stdout.write(handle.read())
