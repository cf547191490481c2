# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""The ranks' compile and JIT caches on the node, one directory per engine image (docs/warm-boots.md).

Every cache a rank fills (vLLM's torch.compile, inductor, Triton, FlashInfer, DeepGEMM, torch extensions, CUDA's
PTX cache) is pointed by the profile's environment into /cache/image, which is the node's
<engine_cache_dir>/images/<image ID>: a relaunch of the same image finds them warm, another image never loads them
(each library's own keys then separate configurations within one image). Directories of other images are pruned
oldest launch first, down to a size limit.
"""

from __future__ import annotations

import re

# Where a rank sees its image's cache directory.
IMAGE_CACHE_MOUNT = "/cache/image"
_IMAGE_ID = re.compile(r"^(sha256:)?([0-9a-f]{12,64})$")
_LISTING = re.compile(r"^(\d+)(?:\.\d+)? (\d+) (\S+)$")


class EngineCacheError(ValueError):
    """An image ID or a listing we cannot read, named with the fix."""


def image_cache_name(image_id):
    """The directory of an image's caches: the first 12 hex digits of its ID (as `docker images` shows it)."""
    match = _IMAGE_ID.match(str(image_id or ""))
    if not match:
        raise EngineCacheError(f"{image_id!r} is not a Docker image ID (sha256:<hex>): read it with `docker image inspect -f '{{{{.Id}}}}' IMAGE`.")
    return match.group(2)[:12]


def parse_listing(text):
    """Lines `<last launch, epoch s> <bytes> <directory>` -> [{name, last_launch, bytes}]."""
    entries = []
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        match = _LISTING.match(line.strip())
        if not match:
            raise EngineCacheError(f"cannot read the image caches' listing line {line!r} (want: <epoch seconds> <bytes> <directory>).")
        entries.append({"last_launch": int(match.group(1)), "bytes": int(match.group(2)), "name": match.group(3)})
    return entries


def to_prune(listing, keep, limit_bytes):
    """The image cache directories to remove, oldest launch first, until what is left fits `limit_bytes`; the ones in
    `keep` (this launch's image and the image of the ranks kept for a roll back) are never removed."""
    entries = parse_listing(listing)
    kept = {image_cache_name(image) for image in keep if image}
    total = sum(entry["bytes"] for entry in entries)
    removed = []
    for entry in sorted(entries, key=lambda entry: (entry["last_launch"], entry["name"])):
        if total <= int(limit_bytes):
            break
        if entry["name"] in kept:
            continue
        removed.append(entry["name"])
        total -= entry["bytes"]
    return removed
