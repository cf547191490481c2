#!/bin/sh
# Entrypoint of every engine rank: the image's own ENTRYPOINT is already
# `vllm serve`, so the engine role sets this one and passes `vllm serve ...`.
# With NCCL_IB_GID_INDEX=auto it picks the GID NCCL must use on RoCE: the
# first "RoCE v2" GID of the first HCA's port 1 that is IPv4-mapped
# (::ffff:a.b.c.d), as the recipe does by hand.
set -eu

if [ "${NCCL_IB_GID_INDEX:-}" = "auto" ]; then
  unset NCCL_IB_GID_INDEX
  hca=${NCCL_IB_HCA%%,*}
  hca=${hca#=}
  hca=${hca%%:*}
  port_dir="/sys/class/infiniband/$hca/ports/1"
  if [ -n "$hca" ] && [ -d "$port_dir/gids" ]; then
    for index in $(seq 0 15); do
      type=$(cat "$port_dir/gid_attrs/types/$index" 2>/dev/null || true)
      gid=$(cat "$port_dir/gids/$index" 2>/dev/null || true)
      case "$type:$gid" in
        "RoCE v2:0000:0000:0000:0000:0000:ffff:"*)
          NCCL_IB_GID_INDEX=$index
          export NCCL_IB_GID_INDEX
          echo "sparkfleet: NCCL_IB_GID_INDEX=$index ($hca, $gid)" >&2
          break
          ;;
      esac
    done
  fi
  if [ -z "${NCCL_IB_GID_INDEX:-}" ]; then
    echo "sparkfleet: no IPv4-mapped RoCE v2 GID on '${hca:-<no NCCL_IB_HCA>}' port 1; NCCL chooses" >&2
  fi
fi

exec "$@"
