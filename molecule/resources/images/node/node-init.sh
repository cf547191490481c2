#!/bin/bash
# PID 1 of a simulated Spark: install the controller's SSH key, start the
# node's own Docker engine, then serve SSH in the foreground. No systemd runs
# here, so dockerd is started directly, the way FACTS.md measured it.
set -eu

user=${SIM_DEPLOY_USER:-nvidia}
if [ -n "${SIM_AUTHORIZED_KEY:-}" ]; then
  printf '%s\n' "$SIM_AUTHORIZED_KEY" > "/home/$user/.ssh/authorized_keys"
  chown "$user:$user" "/home/$user/.ssh/authorized_keys"
  chmod 0600 "/home/$user/.ssh/authorized_keys"
fi
# Fresh host keys per node, as on separate machines.
[ -f /etc/ssh/ssh_host_ed25519_key ] || ssh-keygen -A >/dev/null

# A stale pid file from a previous run of this container keeps dockerd down.
rm -f /var/run/docker.pid /run/docker/containerd/containerd.pid
# The node's engine puts its containers (the rank) inside this node's memory
# cgroup, as everything on a Spark lives in the Spark's memory: the node's
# --memory limit bounds the engine too. cgroup v1 with the host's cgroup
# namespace (FACTS.md), so /proc/self/cgroup names the node's own cgroup.
parent=$(awk -F: '$2 == "memory" {print $3}' /proc/self/cgroup)
dockerd ${parent:+--cgroup-parent "$parent"} >/var/log/dockerd.log 2>&1 &

exec /usr/sbin/sshd -D -e
