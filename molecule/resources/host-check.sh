#!/usr/bin/env bash
# What `make demo` / `make test` need on this machine, installed when missing:
# a Docker engine that answers, mmdebstrap, and HAProxy (the front door's
# integration tests run the distribution's haproxy in front of a vLLM CPU server). Stops with a message naming
# what is missing when it cannot fix it (disk, memory, root).
# --tools: only the distribution's tools that tests run without a cluster (`make unit`, `make checks`): no disk or
# memory floor, no Docker engine started.
set -euo pipefail

tools_only=false
case "${1:-}" in
  "") ;;
  --tools) tools_only=true ;;
  *) echo "host-check: unknown option '$1'; use --tools (the unit tests' tools only) or nothing" >&2; exit 2 ;;
esac

min_disk_gb=${SIM_MIN_DISK_GB:-30}   # images ~6 GB + four nodes' copies of the engine image (~4 x 3.5 GB) + venv; make test sets its own
min_mem_gb=${SIM_MIN_MEM_GB:-14}     # four nodes of 4 GiB (molecule/resources/vars/sim.yml), each mostly held by its rank
root=$(cd "$(dirname "$0")/../.." && pwd)

fail() { echo "host-check: $*" >&2; exit 1; }

# What an earlier run left on this machine and the next one reuses instead of writing: the simulation's images and
# its kept Docker storage (the head's engine image, the registry's layers; sparkfleet-sim/* and sparkfleet-sim-*).
# The floors are a new machine's, which writes all of it; a machine that holds some of it needs that much less.
# Nothing when no engine answers yet (a new machine): the whole floor stands. Shared image layers count once.
# In GiB, as the free disk and the floors are: docker prints decimal units (go-units HumanSize: 512B, 3.5kB, 1.23GB).
reused_gb() {
  docker info >/dev/null 2>&1 || { echo 0; return; }
  docker system df -v --format \
    '{{range .Images}}image {{.Repository}} {{.UniqueSize}} {{.SharedSize}};{{end}}{{range .Volumes}}volume {{.Name}} {{.Size}};{{end}}' \
    2>/dev/null | tr ';' '\n' | awk '
      function gb(size,  n, unit) {
        n = size + 0; unit = size; sub(/^[0-9.]+/, "", unit)
        if (unit == "kB") return n / 1e6
        if (unit == "MB") return n / 1e3
        if (unit == "GB") return n
        if (unit == "TB") return n * 1e3
        return n / 1e9
      }
      $1 == "image" && $2 ~ /^sparkfleet-sim\// { total += gb($3); if (gb($4) > shared) shared = gb($4) }
      $1 == "volume" && $2 ~ /^sparkfleet-sim-/ { total += gb($3) }
      END { print int((total + shared) * 1e9 / 1073741824) }'
}

if ! $tools_only; then
  free_gb=$(df -Pk "$root" | awk 'NR==2 {print int($4 / 1048576)}')
  reused=$(reused_gb)
  need_gb=$(( min_disk_gb > reused ? min_disk_gb - reused : 0 ))
  [ "$free_gb" -ge "$need_gb" ] || fail "only ${free_gb} GB free on $(df -P "$root" | awk 'NR==2 {print $6}'); this needs ${need_gb} GB (${min_disk_gb} GB on a new machine, less the ${reused} GB of the simulation's images and kept storage already here; make test's two simulated clusters need more than make demo's one). Free space, or set SIM_MIN_DISK_GB to a new machine's need if yours is known to be less."
  # Memory the simulation's own running nodes hold is theirs already (a re-run keeps them): it counts
  # as available, as preflight counts a serving engine's own memory. Anything else's does not.
  sim_held_kb=0
  # Their anonymous memory only: their page cache is in MemAvailable already.
  for id in $(docker ps --no-trunc -q --filter label=io.sparkfleet.sim 2>/dev/null); do
    for stat in /sys/fs/cgroup/memory/docker/"$id"/memory.stat /sys/fs/cgroup/system.slice/docker-"$id".scope/memory.stat; do
      [ -r "$stat" ] || continue
      sim_held_kb=$(( sim_held_kb + $(awk '$1 == "total_rss" || $1 == "anon" {print int($2 / 1024)}' "$stat") ))
      break
    done
  done
  mem_gb=$(awk -v held="$sim_held_kb" '/^MemAvailable:/ {print int(($2 + held) / 1048576)}' /proc/meminfo)
  [ "$mem_gb" -ge "$min_mem_gb" ] || fail "only ${mem_gb} GB of memory available (the simulation's running nodes included); this needs ${min_mem_gb} GB (make test's two simulated clusters need more than make demo's one). Free memory, or set SIM_MIN_MEM_GB."
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  if sudo -n true 2>/dev/null; then sudo_cmd=(sudo -n); else sudo_cmd=(); fi
fi
need_install=()
# The unit tests run the Docker CLI's own flag parser (tests/unit/test_container_spec.py), pointed at no engine.
if $tools_only; then
  command -v docker >/dev/null 2>&1 || need_install+=(docker.io)
else
  command -v dockerd >/dev/null 2>&1 || need_install+=(docker.io)
  command -v mmdebstrap >/dev/null 2>&1 || need_install+=(mmdebstrap)
  command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || need_install+=(haproxy)
fi
# promtool and amtool check the monitoring role's rules and Alertmanager's configuration
# (tests/unit/test_monitoring_rules.py); they come with the distribution's Prometheus and Alertmanager.
command -v promtool >/dev/null 2>&1 || need_install+=(prometheus)
command -v amtool >/dev/null 2>&1 || need_install+=(prometheus-alertmanager)
if [ "${#need_install[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ] && [ "${#sudo_cmd[@]}" -eq 0 ]; then
    fail "missing ${need_install[*]}, and installing packages needs root: run as root, or install them (apt-get install ${need_install[*]})."
  fi
  echo "host-check: installing ${need_install[*]}"
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${need_install[@]}" >/dev/null
fi

if $tools_only; then
  echo "host-check: the unit tests' tools are here (docker CLI, promtool, amtool)"
  exit 0
fi

if ! docker info >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ] && [ "${#sudo_cmd[@]}" -eq 0 ]; then
    fail "no Docker engine answers, and starting one needs root: start dockerd (or the docker service)."
  fi
  echo "host-check: starting dockerd (log: /var/log/dockerd.log)"
  "${sudo_cmd[@]}" bash -c 'nohup dockerd >/var/log/dockerd.log 2>&1 &'
  for _ in $(seq 1 30); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || fail "dockerd did not start: see /var/log/dockerd.log"
fi
echo "host-check: ok (${free_gb} GB disk free, ${need_gb} needed; ${mem_gb} GB memory free, Docker $(docker version --format '{{.Server.Version}}'))"
