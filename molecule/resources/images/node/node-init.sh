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

# A simulated GB10 (the gb10 rehearsal: SIM_GB10=1) has what the silicon brings that Docker checks: the
# GPU runtime hook on PATH before dockerd starts (it registers `--gpus` then), and RDMA character devices
# under /dev/infiniband (uverbs and rdma_cm's numbers), which `--device=/dev/infiniband` passes on.
if [ "${SIM_GB10:-0}" = 1 ]; then
  install -m 0755 /opt/sparkfleet-sim/gb10/nvidia-container-runtime-hook /usr/bin/nvidia-container-runtime-hook
  mkdir -p /dev/infiniband
  [ -e /dev/infiniband/uverbs0 ] || mknod -m 0666 /dev/infiniband/uverbs0 c 231 192
  [ -e /dev/infiniband/uverbs1 ] || mknod -m 0666 /dev/infiniband/uverbs1 c 231 193
  [ -e /dev/infiniband/rdma_cm ] || mknod -m 0666 /dev/infiniband/rdma_cm c 10 58
fi

# A stale pid file from a previous run of this container keeps dockerd down.
rm -f /var/run/docker.pid /run/docker/containerd/containerd.pid
# The node's engine puts its containers (the rank) inside this node's memory
# cgroup, as everything on a Spark lives in the Spark's memory: the node's
# --memory limit bounds the engine too. cgroup v1 with the host's cgroup
# namespace (FACTS.md), so /proc/self/cgroup names the node's own cgroup.
parent=$(awk -F: '$2 == "memory" {print $3}' /proc/self/cgroup)
dockerd ${parent:+--cgroup-parent "$parent"} >/var/log/dockerd.log 2>&1 &

exec /usr/sbin/sshd -D -e
