#!/usr/bin/env bash
# Build the Debian 12 base image of the simulated cluster from Debian's archive.
# No container registry can be reached from the build machines, so the base is
# bootstrapped with mmdebstrap and imported; an existing image is kept.
# mmdebstrap, not debootstrap: apt fetches and unpacks the same package set (Essential, apt, python3,
# ca-certificates) at about half debootstrap's wall and CPU (benchmarks/base_bootstrap.py, docs/measurements.md).
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

hooks=/usr/share/mmdebstrap/hooks/merged-usr
if [ ! -d "$hooks" ]; then
  echo "build.sh: this mmdebstrap ($(mmdebstrap --version 2>/dev/null || echo 'not found')) has no $hooks;" \
    "it needs mmdebstrap 0.8.0 or later (Debian 12's: apt-get install mmdebstrap)" >&2
  exit 1
fi

work=$(mktemp -d /var/tmp/sparkfleet-rootfs.XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "bootstrapping Debian $suite from $mirror (under a minute)"
# usr-is-merged and the merged-usr hook: bookworm's init-system-helpers wants `usrmerge | usr-is-merged`, and apt
# would take usrmerge (and perl with it); debootstrap merges /usr itself. mmdebstrap removes apt's lists and
# downloaded packages from the tarball by default: a container refetches them.
mmdebstrap --quiet --variant=minbase --include=python3,ca-certificates,usr-is-merged \
  --hook-dir="$hooks" \
  "$suite" "$work/rootfs.tar" "$mirror" >"$work/log" 2>&1 || { tail -n 30 "$work/log"; exit 1; }
# A file first, then the import: a bootstrap that fails half-way leaves no image under the name to be kept.
docker import --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' "$work/rootfs.tar" "$image_ref" >/dev/null
echo "base image $image_ref built"
