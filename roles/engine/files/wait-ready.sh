#!/bin/sh
# Wait until the head's API answers /health, and give up at once when the
# head's container stops or restarts instead of waiting out the timeout.
# Usage: wait-ready.sh CONTAINER URL TIMEOUT_S POLL_S
set -u
container=$1 url=$2 timeout=$3 poll=$4
started=$(date +%s)
while :; do
  state=$(docker inspect --format '{{.State.Status}} {{.RestartCount}}' "$container" 2>/dev/null || echo "missing 0")
  case "$state" in
    "running 0") ;;
    *) echo "the head's container is '$state' instead of running"; exit 3 ;;
  esac
  code=$(python3 -c 'import sys, urllib.request
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=10).status)
except Exception as error:
    print(getattr(error, "code", 0))' "$url")
  if [ "$code" = 200 ]; then
    echo "healthy after $(( $(date +%s) - started )) s"
    exit 0
  fi
  if [ $(( $(date +%s) - started )) -ge "$timeout" ]; then
    echo "not healthy after ${timeout} s (last /health status: $code)"
    exit 4
  fi
  sleep "$poll"
done
