#!/bin/sh
# Wait until the head's API answers /health, and give up at once when the
# head's container stops or restarts, or a worker's node stops answering,
# instead of waiting out the timeout.
# Usage: wait-ready.sh CONTAINER URL TIMEOUT_S POLL_S [NAME=HOST:PORT ...]
# (one NAME=HOST:PORT per worker: its SSH port, which answers while the node is up)
set -u
container=$1 url=$2 timeout=$3 poll=$4
shift 4
started=$(date +%s)
while :; do
  state=$(docker inspect --format '{{.State.Status}} {{.RestartCount}}' "$container" 2>/dev/null || echo "missing 0")
  case "$state" in
    "running 0") ;;
    *) echo "the head's container is '$state' instead of running"; exit 3 ;;
  esac
  code=$(python3 - "$url" "$@" <<'PY'
import socket, sys, urllib.request
gone = []
for worker in sys.argv[2:]:
    name, _, address = worker.partition("=")
    host, _, port = address.rpartition(":")
    for attempt in range(2):
        try:
            socket.create_connection((host, int(port)), timeout=5).close()
            break
        except OSError:
            pass
    else:
        gone.append(f"{name} ({address})")
if gone:
    print("gone " + ", ".join(gone))
    sys.exit()
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=10).status)
except Exception as error:
    print(getattr(error, "code", 0))
PY
)
  case "$code" in
    gone*) echo "worker node(s) stopped answering while the engine booted: ${code#gone }"; exit 5 ;;
    # The epoch time goes into the readiness timeline (engine_timeline).
    200) echo "healthy after $(( $(date +%s) - started )) s (at $(date +%s.%N))"; exit 0 ;;
  esac
  if [ $(( $(date +%s) - started )) -ge "$timeout" ]; then
    echo "not healthy after ${timeout} s (last /health status: $code)"
    exit 4
  fi
  sleep "$poll"
done
