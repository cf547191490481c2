#!/usr/bin/env bash
# at_cpu_weight.sh NAME WEIGHT COMMAND [ARG...]: run COMMAND, and everything it starts, in a CPU cgroup of its own
# (sparkfleet-NAME) whose weight is WEIGHT, where 100 is what one session of processes weighs by default.
#
# Why a cgroup (make test's checks and rehearsal, docs/measurements.md): where the kernel groups each session
# (sched_autogroup_enabled), every Ansible task worker calls setsid and weighs as much as a whole session, so
# neither nice nor an autogroup's nice holds a playbook back. A process in a cgroup other than the root is outside
# autogroups: the cgroup's weight is the share of all it starts, workers included.
# Where no CPU cgroup can be made (not root, no cpu controller), COMMAND runs as it would have, and says so.
# at_cpu_weight.sh --remove NAME...: remove those cgroups once their processes have ended (make test's last step).
set -uo pipefail
v1=/sys/fs/cgroup/cpu v2=/sys/fs/cgroup
if [ "${1:-}" = --remove ]; then
  shift
  for name in "$@"; do rmdir "$v1/sparkfleet-$name" "$v2/sparkfleet-$name" 2>/dev/null; done
  exit 0 # one that is not there, or still holds a process, stays as it is
fi
name=sparkfleet-$1 weight=$2
shift 2

# Each returns non-zero where the cgroup cannot be made or joined (a cgroup tree this user may not change, one
# another manager delegates): then COMMAND runs at the default weight rather than not at all.
join_v1() {
  [ -w "$v1" ] && [ -f "$v1/cpu.shares" ] && mkdir -p "$v1/$name" &&
    echo $((weight * 1024 / 100)) >"$v1/$name/cpu.shares" && # cgroup v1: 1024 shares are one session's
    echo $$ >"$v1/$name/cgroup.procs"
}
join_v2() {
  [ -w "$v2/cgroup.subtree_control" ] && grep -qw cpu "$v2/cgroup.controllers" &&
    { grep -qw cpu "$v2/cgroup.subtree_control" || echo +cpu >"$v2/cgroup.subtree_control"; } &&
    mkdir -p "$v2/$name" && echo "$weight" >"$v2/$name/cpu.weight" && # cgroup v2: a weight of 100 is the default
    echo $$ >"$v2/$name/cgroup.procs"
}
join_v1 2>/dev/null || join_v2 2>/dev/null ||
  echo "at_cpu_weight: no CPU cgroup can be made or joined here; $name runs at the default weight" >&2
exec "$@"
