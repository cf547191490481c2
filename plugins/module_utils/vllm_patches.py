# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Patches to vLLM: a manifest of unified diffs, checked against the file they were made for.

A diff applied to another version of its file is a guess, so every patch
names the vLLM version and the sha256 of its base file, and nothing is
applied unless the image's file is that file. Applying is GNU patch's job
(`--dry-run` first); this module decides, names and checks.
Pure Python, no Ansible imports.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile

REQUIRED = ("name", "diff", "target", "vllm_version", "base_sha256")


class PatchError(ValueError):
    """A manifest, a base file or a diff that cannot be used, with what to do."""


def sha256_text(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def public_version(version):
    """'0.32.0+cpu' -> '0.32.0': the local build tag does not change the source."""
    return str(version).split("+", 1)[0]


def select(manifest, names, diffs):
    """The manifest's entries named by a profile, in the profile's order, each with its diff text.

    manifest: the parsed manifest.yml ({"patches": [...]}); diffs: {diff file name: text}.
    """
    entries = {}
    for entry in (manifest or {}).get("patches") or []:
        missing = [key for key in REQUIRED if not entry.get(key)]
        if missing:
            raise PatchError(f"patch {entry.get('name', '?')} in patches/manifest.yml lacks {', '.join(missing)}")
        if not re.fullmatch(r"[0-9a-f]{64}", str(entry["base_sha256"])):
            raise PatchError(f"patch {entry['name']}: base_sha256 must be 64 hex digits, got {entry['base_sha256']!r}")
        target = str(entry["target"])
        if target.startswith("/") or ".." in target.split("/") or not target.startswith("vllm/"):
            raise PatchError(f"patch {entry['name']}: target {target!r} must be a path under vllm/ (relative)")
        entries[entry["name"]] = entry
    selected = []
    for name in names or []:
        if name not in entries:
            raise PatchError(f"profile patch {name} is not in patches/manifest.yml (known: {', '.join(sorted(entries)) or 'none'})")
        entry = dict(entries[name])
        if entry["diff"] not in diffs:
            raise PatchError(f"patch {name}: patches/{entry['diff']} is missing")
        entry["diff_text"] = diffs[entry["diff"]]
        # What the patched file depends on besides the image: a change to any of it is a new file.
        entry["entry_sha256"] = sha256_text("\n".join([entry["diff_text"], entry["target"], str(entry["vllm_version"]), entry["base_sha256"]]))
        selected.append(entry)
    return selected


def check_base(entry, vllm_version, base_text):
    """Refuse a patch whose base is not the image's file; None when it is."""
    found_sha = sha256_text(base_text) if base_text is not None else None
    if base_text is None:
        return (
            f"patch {entry['name']}: the image has no {entry['target']} (made for vLLM {entry['vllm_version']}); "
            f"remove the patch from the profile or remake it for this image."
        )
    if public_version(vllm_version) != public_version(entry["vllm_version"]) or found_sha != entry["base_sha256"]:
        return (
            f"patch {entry['name']} was made against vLLM {entry['vllm_version']} ({entry['target']} sha256 {entry['base_sha256'][:12]}...), "
            f"but the image has vLLM {vllm_version} with sha256 {found_sha[:12]}... Nothing was started. "
            f"Remake the patch against this image's file (patches/README.md) or run the image it was made for."
        )
    return None


def apply(entry, base_text, patch_bin="patch"):
    """The patched text of base_text, or PatchError with patch's own words. Dry run first."""
    with tempfile.TemporaryDirectory(prefix="sparkfleet-patch-") as work:
        base = os.path.join(work, "base.py")
        diff = os.path.join(work, "change.diff")
        out = os.path.join(work, "patched.py")
        with open(base, "w", encoding="utf-8") as handle:
            handle.write(base_text)
        with open(diff, "w", encoding="utf-8") as handle:
            handle.write(entry["diff_text"])
        for dry_run in (True, False):
            argv = [patch_bin, "--batch", "--forward", "--silent", "--reject-file=-", "-o", out, base, diff]
            if dry_run:
                argv.insert(1, "--dry-run")
            result = subprocess.run(argv, capture_output=True, text=True, check=False)
            if result.returncode != 0:
                said = (result.stdout + result.stderr).strip()[:500]
                raise PatchError(f"patch {entry['name']} does not apply to {entry['target']}: {said}")
        with open(out, encoding="utf-8") as handle:
            return handle.read()


def patched_name(entry, image_id):
    """Where the patched file lives on a node: one per (image, manifest entry), so changing either makes a new one."""
    image = str(image_id).split(":")[-1][:12]
    return f"{entry['name']}/{image}-{entry['entry_sha256'][:12]}-{os.path.basename(entry['target'])}"
