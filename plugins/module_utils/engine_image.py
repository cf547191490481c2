# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""The engine image: where it comes from, and which nodes need it.

Every rank of an engine must run the same image: different builds under one
tag are a known cause of NCCL hangs. The head obtains the image once (pull by
digest, load from a tarball, or build), then each worker is judged by image
ID against the head's: same (nothing to do), holding the head's ID under
another name (a re-tag, no transfer), or missing / different (sent).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile

SOURCES = ("pull", "load", "build")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


class ImageSourceError(ValueError):
    """A bad image setting; the message names the value and the fix."""


def parse_reference(reference: str) -> dict:
    """Split NAME[:TAG][@DIGEST] (the registry host may carry a port: its colon is not a tag)."""
    if not reference or any(char.isspace() for char in reference):
        raise ImageSourceError(f"engine image reference {reference!r} is empty or has spaces")
    name, _unused, digest = reference.partition("@")
    if digest and not _DIGEST.match(digest):
        raise ImageSourceError(f"engine image {reference}: digest {digest!r} is not sha256:<64 hex> (copy it from `docker buildx imagetools inspect`)")
    last = name.rsplit("/", 1)[-1]
    tag = ""
    if ":" in last:
        tag = last.rsplit(":", 1)[1]
        name = name[: -len(tag) - 1]
    return {"name": name, "tag": tag, "digest": digest, "reference": reference}


def local_reference(reference: str) -> str:
    """NAME:TAG without the digest: the name every node holds and runs.

    A pull by digest leaves the image untagged, and docker save/load carries
    tags but not registry digests, so the workers could not resolve
    NAME@sha256:... . Without a tag, the digest's first 12 digits make one.
    """
    parsed = parse_reference(reference)
    tag = parsed["tag"] or ("sha256-" + parsed["digest"][7:19] if parsed["digest"] else "latest")
    return "{}:{}".format(parsed["name"], tag)


def digest_reference(reference: str) -> str:
    """NAME@sha256:... where the reference has a digest (else the reference): what Docker files a pull
    by digest under. It answers NAME:TAG@sha256:... with nothing, the tag of such a pull being ignored."""
    parsed = parse_reference(reference)
    return "{}@{}".format(parsed["name"], parsed["digest"]) if parsed["digest"] else reference


def check_source(source: str, reference: str, *, require_digest: bool, tarball: str = "", context: str = "") -> list[str]:
    """Validate the image settings before anything moves. Returns warnings; raises on errors."""
    if source not in SOURCES:
        raise ImageSourceError(
            "engine_image_source {!r} is not one of {} (pull by digest, load a tarball, build a Dockerfile directory)".format(source, ", ".join(SOURCES))
        )
    parsed = parse_reference(reference)
    warnings = []
    if source == "pull" and not parsed["digest"]:
        message = (
            f"engine image {reference} has no digest: a tag can move, and ranks on different builds hang NCCL. "
            "Pin it as NAME:TAG@sha256:... (recipe.md gives the SM121 image's digest)"
        )
        if require_digest:
            raise ImageSourceError(message + " (engine_image_require_digest is true)")
        warnings.append(message)
    if source == "load" and not tarball:
        raise ImageSourceError("engine_image_source is load but engine_image_tarball is empty: give the tarball's path on the controller")
    if source == "build" and not context:
        raise ImageSourceError("engine_image_source is build but engine_image_build_context is empty: give a Dockerfile directory on the controller")
    if source in ("load", "build") and parsed["digest"]:
        raise ImageSourceError(
            "engine image {} carries a digest but is {}ed here: a digest names a registry manifest, which a "
            "local {} does not have. Drop the @sha256:... part".format(reference, "load" if source == "load" else "built", source)
        )
    return warnings


def check_pulled_digest(reference: str, repo_digests: list[str]) -> None:
    """After a pull, the image's RepoDigests must hold the pinned digest."""
    parsed = parse_reference(reference)
    if not parsed["digest"]:
        return
    digests = [entry.partition("@")[2] for entry in repo_digests or []]
    if parsed["digest"] not in digests:
        raise ImageSourceError(
            "the image pulled for {} has digests {}, not the pinned {}: the registry serves another image "
            "under this reference. Check the digest (recipe.md) or the registry; nothing was sent to the workers".format(
                reference, ", ".join(digests) or "none", parsed["digest"]
            )
        )


def plan(head: str, members: list[str], nodes: dict) -> dict:
    """Judge every worker against the head's image ID.

    nodes: node -> {"id": ID under the engine's name ("" when absent),
                    "holds_head": whether the node holds the head's ID under any name}.
    """
    head_id = (nodes.get(head) or {}).get("id") or ""
    if not head_id:
        raise ImageSourceError(f"the head {head} holds no engine image after obtaining it")
    workers = [member for member in members if member != head]
    ids = {node: (nodes.get(node) or {}).get("id") or "" for node in workers}
    same = [node for node in workers if ids[node] == head_id]
    retag = [node for node in workers if ids[node] != head_id and (nodes.get(node) or {}).get("holds_head")]
    send = [node for node in workers if node not in same and node not in retag]
    different = {node: ids[node] for node in workers if ids[node] and ids[node] != head_id}
    return {"head_id": head_id, "same": same, "retag": retag, "send": send, "different": different}


def disk_shortfalls(required_bytes, free_bytes: dict, reserve_bytes: int = 0) -> list[str]:
    """Nodes without room for what they are about to receive, each with its sizes.

    required_bytes: one size for every node, or node -> size.
    """
    problems = []
    for node, free in sorted(free_bytes.items()):
        required = required_bytes[node] if isinstance(required_bytes, dict) else required_bytes
        need = required + reserve_bytes
        if free < need:
            problems.append(
                f"{node} has {free / 2**30:.1f} GiB free, needs {need / 2**30:.1f} GiB "
                f"({required / 2**30:.1f} GiB to receive + {reserve_bytes / 2**30:.1f} GiB reserve)"
            )
    return problems


def _context_files(path: str) -> list:
    """The context's files in fingerprint order, each with its relative path."""
    found = []
    for directory, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(directory, name)
            found.append((full, os.path.relpath(full, path)))
    return found


def _stat_signature(files: list) -> str:
    """sha256 over each file's path, size, mtime, ctime, inode and device (git's index test).

    Rewriting a file's bytes moves its ctime even when size and mtime are put back, so an
    unchanged signature means unchanged files without reading them."""
    digest = hashlib.sha256()
    for full, relative in files:
        info = os.stat(full)
        digest.update(f"{relative}\0{info.st_size}\0{info.st_mtime_ns}\0{info.st_ctime_ns}\0{info.st_ino}\0{info.st_dev}\n".encode())
    return digest.hexdigest()


def context_fingerprint(path: str, cache_dir: str = "") -> str:
    """sha256 over a build context's relative paths and contents: the image's label, so an unchanged
    context is neither copied to the head nor built again.

    With cache_dir, the result is kept beside the files' stat signature and reused while that is
    unchanged: the cpu context is ~900 MB, read on every run otherwise (~2.7 s on two cores)."""
    if not os.path.isdir(path):
        raise ImageSourceError(f"build context {path} is not a directory on the controller")
    files = _context_files(path)
    cache_file = ""
    if cache_dir:
        signature = _stat_signature(files)
        cache_file = os.path.join(cache_dir, hashlib.sha256(os.path.realpath(path).encode()).hexdigest()[:16] + ".json")
        try:
            with open(cache_file, encoding="utf-8") as handle:
                kept = json.load(handle)
            if kept.get("signature") == signature and _DIGEST.match("sha256:" + str(kept.get("fingerprint", ""))):
                return kept["fingerprint"]
        except (OSError, ValueError, AttributeError):
            pass  # no cache yet, or a damaged one: compute it
    digest = hashlib.sha256()
    for full, relative in files:
        digest.update(relative.encode() + b"\0")
        with open(full, "rb") as handle:
            for block in iter(lambda: handle.read(8 << 20), b""):
                digest.update(block)
    fingerprint = digest.hexdigest()
    if cache_file:
        _keep(cache_file, {"path": os.path.realpath(path), "signature": signature, "fingerprint": fingerprint})
    return fingerprint


def _keep(cache_file: str, record: dict) -> None:
    """Write the cache whole or not at all; a cache that cannot be written only costs the next run a read."""
    try:
        os.makedirs(os.path.dirname(cache_file), exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=os.path.dirname(cache_file), suffix=".tmp")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(record, out)
            os.replace(temporary, cache_file)
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
    except OSError:
        pass
