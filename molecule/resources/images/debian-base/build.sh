#!/usr/bin/env bash
# Build the Debian 12 base image of the simulated cluster from Debian's archive.
# No container registry can be reached from the build machines, so the base is
# bootstrapped with debootstrap and imported; an existing image is kept.
# Usage: build.sh IMAGE_REF
set -euo pipefail

image_ref=${1:?usage: build.sh IMAGE_REF}
suite=bookworm

if docker image inspect "$image_ref" >/dev/null 2>&1; then
  echo "base image $image_ref present: kept"
  exit 0
fi

# Use the mirror this machine's apt already trusts (a proxy or snapshot on CI).
mirror=$( { grep -rhoE 'https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list \
  /etc/apt/sources.list.d/ 2>/dev/null || true; } | head -n1 | tr -d ' ')
mirror=${mirror:-http://deb.debian.org/debian}

rootfs=$(mktemp -d /var/tmp/sparkfleet-rootfs.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT
echo "bootstrapping Debian $suite from $mirror (about a minute)"
debootstrap --variant=minbase --include=python3,ca-certificates \
  "$suite" "$rootfs" "$mirror" >"$rootfs.log" 2>&1 || { tail -n 30 "$rootfs.log"; exit 1; }
rm -f "$rootfs.log"
# Drop what a container never needs: package lists and caches are refetched by apt.
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
tar -C "$rootfs" -c . | docker import \
  --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' - "$image_ref" >/dev/null
echo "base image $image_ref built"
