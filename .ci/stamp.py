"""Pass `make test`'s output through unchanged and keep a copy with the time of every line.

Usage: make test 2>&1 | python3 .ci/stamp.py LOG
The copy (LOG: "EPOCH_SECONDS<TAB>line") is what .ci/stage_times.py reads.
"""

import sys
import time

with open(sys.argv[1], "w", encoding="utf-8", errors="replace") as log:
    for line in sys.stdin.buffer:
        sys.stdout.buffer.write(line)
        sys.stdout.flush()
        log.write("{:.3f}\t{}".format(time.time(), line.decode("utf-8", errors="replace")))
        log.flush()
