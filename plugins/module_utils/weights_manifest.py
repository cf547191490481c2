# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""The weights' manifest: every file's size and sha256, made once on the head.

Workers are judged against the head's manifest: a file missing, of another
size or with another sha256 is sent again. Hashing 306 GiB takes minutes, so
each node keeps a record of what it last verified (size, mtime_ns, sha256 per
file) and re-hashes only files whose size or mtime changed since; ``full``
re-hashes everything (a corruption that kept the mtime is only found so).

Files arrive in a staging directory and are moved under their final name only
after their sha256 matched: a node never holds a half-written weights file
under the name vLLM reads.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil

MANIFEST_NAME = ".sparkfleet-manifest.json"
VERIFIED_NAME = ".sparkfleet-verified.json"
STAGING_NAME = ".sparkfleet-incoming"
# huggingface_hub's own bookkeeping inside a local_dir download: not weights.
IGNORED_DIRS = (".cache", STAGING_NAME)
IGNORED_FILES = (MANIFEST_NAME, VERIFIED_NAME)
HASH_CHUNK = 8 << 20


class ManifestError(Exception):
    """Bad manifest or a file that failed its check; the message names it."""


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(HASH_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def list_files(root: str) -> list[str]:
    """Relative paths of the weights' files, sorted (bookkeeping files and dirs left out)."""
    found = []
    for directory, dirs, files in os.walk(root):
        relative_dir = os.path.relpath(directory, root)
        if relative_dir == ".":
            dirs[:] = [name for name in dirs if name not in IGNORED_DIRS]
        for name in files:
            relative = os.path.normpath(os.path.join(relative_dir, name))
            if relative in IGNORED_FILES:
                continue
            found.append(relative)
    return sorted(found)


def _read_json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return {}
    except ValueError:
        return {}  # a damaged record only costs a re-hash


def write_json(path: str, data: dict) -> None:
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)
    os.replace(temporary, path)


def scan(root: str, full: bool = False) -> tuple[dict, int]:
    """Size and sha256 of every file under root, re-hashing only what changed since the last scan.

    Returns (files, hashed_count) and refreshes the node's verified record.
    """
    record_path = os.path.join(root, VERIFIED_NAME)
    previous = {} if full else _read_json(record_path).get("files", {})
    files: dict[str, dict] = {}
    hashed = 0
    for relative in list_files(root):
        stat = os.stat(os.path.join(root, relative))
        known = previous.get(relative)
        if known and known.get("size") == stat.st_size and known.get("mtime_ns") == stat.st_mtime_ns:
            sha = known["sha256"]
        else:
            sha = file_sha256(os.path.join(root, relative))
            hashed += 1
        files[relative] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": sha}
    if files != previous or not os.path.exists(record_path):
        write_json(record_path, {"files": files})
    return files, hashed


def manifest_from_scan(files: dict, source: dict) -> dict:
    """The manifest: what a worker must hold (no mtimes: they differ between nodes)."""
    return {
        "source": source,
        "files": {name: {"size": entry["size"], "sha256": entry["sha256"]} for name, entry in sorted(files.items())},
        "total_bytes": sum(entry["size"] for entry in files.values()),
    }


def validate_manifest(manifest: dict) -> None:
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict) or not files:
        raise ManifestError(f"the head's manifest lists no files: {manifest!r}")
    for name, entry in files.items():
        if os.path.isabs(name) or ".." in name.split(os.sep):
            raise ManifestError(f"manifest entry {name!r} is not a path inside the weights directory")
        if not isinstance(entry, dict) or not isinstance(entry.get("size"), int) or len(str(entry.get("sha256"))) != 64:
            raise ManifestError(f"manifest entry {name!r} needs an integer size and a sha256: {entry!r}")


def compare(manifest: dict, files: dict) -> dict:
    """What a node lacks against the manifest: missing, wrong (size or sha256), extra; and bytes to send."""
    validate_manifest(manifest)
    expected = manifest["files"]
    missing = sorted(name for name in expected if name not in files)
    wrong = sorted(
        name for name, entry in expected.items() if name in files and (files[name]["size"] != entry["size"] or files[name]["sha256"] != entry["sha256"])
    )
    extra = sorted(name for name in files if name not in expected)
    return {
        "missing": missing,
        "wrong": wrong,
        "extra": extra,
        "needed": sorted(missing + wrong),
        "needed_bytes": sum(expected[name]["size"] for name in missing + wrong),
    }


def commit_staged(root: str, manifest: dict, names: list[str]) -> list[str]:
    """Move verified staged files under their final names; a staged file that fails is deleted, not moved.

    Raises ManifestError naming every file that failed (the others are committed).
    """
    validate_manifest(manifest)
    staging = os.path.join(root, STAGING_NAME)
    committed, failures = [], []
    for name in names:
        staged = os.path.join(staging, name)
        entry = manifest["files"].get(name)
        if entry is None:
            failures.append(f"{name} is not in the manifest")
            continue
        if not os.path.isfile(staged):
            failures.append(f"{name} did not arrive")
            continue
        size = os.path.getsize(staged)
        sha = file_sha256(staged) if size == entry["size"] else ""
        if size != entry["size"] or sha != entry["sha256"]:
            failures.append(f"{name} arrived with {size} bytes (sha256 {sha or 'not computed'}), expected {entry['size']} (sha256 {entry['sha256']})")
            os.unlink(staged)
            continue
        final = os.path.join(root, name)
        os.makedirs(os.path.dirname(final), exist_ok=True)
        os.replace(staged, final)
        committed.append(name)
    shutil.rmtree(staging, ignore_errors=True)
    if failures:
        raise ManifestError("; ".join(failures))
    return committed
