#!/bin/bash
# Build the stand-in CUDA repository under ROOT: for each OS/architecture
# directory NVIDIA publishes (ubuntu2404|debian12 / x86_64|sbsa), stand-in
# .deb packages, Packages/Release indexes (apt-ftparchive), an InRelease
# signed with a throwaway key, and that key's public half.
# Usage: build-repo.sh ROOT
set -euo pipefail
root=${1:?usage: build-repo.sh ROOT}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GNUPGHOME=$work/gnupg
install -d -m 0700 "$GNUPGHOME"
gpg --batch --quiet --passphrase '' --quick-gen-key \
  'sparkfleet stand-in CUDA repository (throwaway test key) <sim@sparkfleet.invalid>' ed25519 sign never

# deb NAME VERSION DEB_ARCH OUTDIR DEPENDS [SRC:DEST ...]
# A package with the real name and version, a note saying it is a stand-in,
# and the files given.
deb() {
  local name=$1 version=$2 arch=$3 outdir=$4 depends=$5
  shift 5
  local pkg=$work/pkg/$name-$version-$arch
  rm -rf "$pkg" && install -d "$pkg/DEBIAN" "$pkg/usr/share/doc/$name"
  printf 'Stand-in for NVIDIA'"'"'s %s %s, built by sparkfleet'"'"'s simulation\n(molecule/resources/images/nvidia-repo). It holds no NVIDIA software.\n' \
    "$name" "$version" > "$pkg/usr/share/doc/$name/STAND-IN"
  for file in "$@"; do
    install -D -m 0755 "${file%%:*}" "$pkg/${file#*:}"
  done
  {
    echo "Package: $name"
    echo "Version: $version"
    echo "Architecture: $arch"
    echo "Maintainer: sparkfleet simulation <sim@sparkfleet.invalid>"
    [ -n "$depends" ] && echo "Depends: $depends"
    echo "Section: libs"
    echo "Priority: optional"
    echo "Description: stand-in for NVIDIA's $name (sparkfleet test repository)"
  } > "$pkg/DEBIAN/control"
  dpkg-deb --root-owner-group --build "$pkg" "$outdir/${name}_${version}_${arch}.deb" >/dev/null
}

for os_dir in ubuntu2404 debian12; do
  for pair in x86_64:amd64 sbsa:arm64; do
    arch_dir=${pair%%:*} deb_arch=${pair#*:}
    out=$root/compute/cuda/repos/$os_dir/$arch_dir
    install -d "$out"
    # The driver: the version sparkfleet pins and a newer one apt would pick unpinned.
    # Debian-style revisions on debian12, Ubuntu-style on ubuntu2404, as NVIDIA publishes them.
    revision=1; [ "$os_dir" = ubuntu2404 ] && revision=0ubuntu1
    for version in "580.95.05-$revision" "580.126.09-$revision"; do
      deb nvidia-open "$version" "$deb_arch" "$out" ""
    done
    # DGX OS's own driver: Canonical-signed packages in Ubuntu's version strings (the rehearsal and the DGX OS
    # case install them on nodes marked as DGX OS; the nvidia_driver role must never replace them).
    for version in 580.95.05-0ubuntu0.24.04.2 580.126.09-0ubuntu0.24.04.1; do
      deb nvidia-driver-580-open "$version" "$deb_arch" "$out" ""
    done
    deb nvidia-container-toolkit "1.18.0-$revision" "$deb_arch" "$out" "" /build/nvidia-ctk:usr/bin/nvidia-ctk
    # NCCL in NVIDIA's own version strings, one package per release and CUDA build: the pinned
    # release 2.30.7 for CUDA 13 (2.30.7-1+cuda13.3) and for CUDA 12, the 2.29.7 FlashInfer's pip
    # downgrades to (fails on the Spark fabric), the repository's CUDA 13.0 build (2.28.9) and a newer
    # release: the nccl role must still resolve and hold 2.30.7-1+cuda13.3.
    # Each libnccl2 holds a stand-in libnccl.so.2 (text, not a library) whose bytes differ per version:
    # enough for the engine's check that every rank would load the same host NCCL.
    triplet=x86_64-linux-gnu; [ "$deb_arch" = arm64 ] && triplet=aarch64-linux-gnu
    for version in 2.28.9-1+cuda13.0 2.29.7-1+cuda13.0 2.30.7-1+cuda12.9 2.30.7-1+cuda13.3 2.31.2-1+cuda13.3; do
      printf 'stand-in libnccl.so.2 of libnccl2 %s (sparkfleet simulation; not a library)\n' "$version" > "$work/libnccl-$version"
      deb libnccl2 "$version" "$deb_arch" "$out" "" "$work/libnccl-$version:usr/lib/$triplet/libnccl.so.2"
      deb libnccl-dev "$version" "$deb_arch" "$out" "libnccl2 (= $version)"
    done
    (
      cd "$out"
      apt-ftparchive packages . > Packages
      gzip -9kn Packages
      # Written beside, then moved: a Release listed inside itself confuses apt.
      apt-ftparchive release . > "$work/Release" && mv "$work/Release" Release
      gpg --batch --yes --clearsign -o InRelease Release
      gpg --batch --yes --armor --detach-sign -o Release.gpg Release
      gpg --batch --armor --export > sparkfleet-standin.pub
    )
  done
done
echo "stand-in repository built under $root"
