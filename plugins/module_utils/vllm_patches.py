# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Patches to vLLM: a manifest of unified diffs and whole files, checked against the file they replace.

Two kinds, one rule. A diff (`diff:`) is applied on the node to the image's
own file; a whole file (`file:`, the recipe's way: its patched
sparse_attn_indexer.py files) replaces it as it is. Either is made against one
file, so every patch names the vLLM version and the sha256 of its base file,
and nothing is used unless the image's file is that file. Applying a diff is
GNU patch's job (`--dry-run` first); this module decides, names and checks.
A patch may declare the graph guards it provides (`guards:`): a profile that
runs CUDA graphs on a GPU that needs one is refused without it.
Pure Python, no Ansible imports.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile

REQUIRED = ("name", "target", "vllm_version", "base_sha256")
KINDS = ("diff", "file")

# What each graph guard protects against, for the refusal (profiles[...].cuda_graph_guards names them).
GRAPH_GUARDS = {
    "persistent_topk": (
        "vLLM's persistent_topk kernel needs 128 KB of shared memory per block and SM12x (GB10) has 101,376 B: with CUDA "
        "graphs on, the engine fails at its first sparse-attention step, after a 12-15 min cold boot (recipe.md)"
    ),
}


class PatchError(ValueError):
    """A manifest, a base file or a diff that cannot be used, with what to do."""


def sha256_text(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def public_version(version):
    """'0.32.0+cpu' -> '0.32.0': the local build tag does not change the source."""
    return str(version).split("+", 1)[0]


def select(manifest, names, texts):
    """The manifest's entries named by a profile, in the profile's order, each with its text.

    manifest: the parsed manifest.yml ({"patches": [...]}); texts: {diff or whole file's name: text}.
    Adds kind ("diff" or "file"), diff_text or file_text, and entry_sha256.
    """
    entries = {}
    for entry in (manifest or {}).get("patches") or []:
        missing = [key for key in REQUIRED if not entry.get(key)]
        kinds = [kind for kind in KINDS if entry.get(kind)]
        if len(kinds) != 1:
            missing.append("exactly one of diff or file" if not kinds else "only one of diff or file (it has both)")
        if missing:
            raise PatchError(f"patch {entry.get('name', '?')} in patches/manifest.yml lacks {', '.join(missing)}")
        if not re.fullmatch(r"[0-9a-f]{64}", str(entry["base_sha256"])):
            raise PatchError(f"patch {entry['name']}: base_sha256 must be 64 hex digits, got {entry['base_sha256']!r}")
        target = str(entry["target"])
        if target.startswith("/") or ".." in target.split("/") or not target.startswith("vllm/"):
            raise PatchError(f"patch {entry['name']}: target {target!r} must be a path under vllm/ (relative)")
        guards = entry.get("guards", [])
        if not isinstance(guards, list) or not all(isinstance(guard, str) and guard for guard in guards):
            raise PatchError(f"patch {entry['name']}: guards must be a list of names (known: {', '.join(sorted(GRAPH_GUARDS))}), got {guards!r}")
        entries[entry["name"]] = entry
    selected = []
    for name in names or []:
        if name not in entries:
            raise PatchError(f"profile patch {name} is not in patches/manifest.yml (known: {', '.join(sorted(entries)) or 'none'})")
        entry = dict(entries[name])
        entry["kind"] = "diff" if entry.get("diff") else "file"
        source = entry[entry["kind"]]
        if source not in texts:
            raise PatchError(f"patch {name}: patches/{source} is missing")
        entry[entry["kind"] + "_text"] = texts[source]
        # What the patched file depends on besides the image: a change to any of it is a new file.
        entry["entry_sha256"] = sha256_text("\n".join([entry["kind"], texts[source], entry["target"], str(entry["vllm_version"]), entry["base_sha256"]]))
        selected.append(entry)
    targets = [entry["target"] for entry in selected]
    twice = sorted({target for target in targets if targets.count(target) > 1})
    if twice:
        raise PatchError(f"two selected patches replace {', '.join(twice)}: keep one ({', '.join(e['name'] for e in selected if e['target'] in twice)})")
    return selected


def mount_guard_entries(mounts):
    """The graph guards of engine_patch_mounts: the recipe's way, its patched files bind-mounted as they are.

    A mount provides its `guards` when it also names the `sha256` of the file it claims to be (the recipe's
    published one): preflight compares that with the file on every node before anything changes. A mount that
    names guards without a sha256 is refused: nothing would tie the claim to the file.
    """
    entries = []
    for mount in mounts or []:
        guards = mount.get("guards") or []
        if not guards:
            continue
        if not isinstance(guards, list) or not all(isinstance(guard, str) and guard for guard in guards):
            known = ", ".join(sorted(GRAPH_GUARDS))
            raise PatchError(f"engine_patch_mounts {mount.get('src')}: guards must be a list of names (known: {known}), got {guards!r}")
        if not re.fullmatch(r"[0-9a-f]{64}", str(mount.get("sha256") or "")):
            raise PatchError(
                f"engine_patch_mounts {mount.get('src')} declares guards {guards} without the sha256 of the file it provides them with "
                f"(got {mount.get('sha256')!r}): add sha256: <the recipe's file's sha256> (sha256sum {mount.get('src')}), which preflight checks on every node."
            )
        entries.append({"name": f"engine_patch_mounts {mount.get('src')}", "guards": guards, "sha256": mount["sha256"]})
    return entries


def missing_graph_guards(required, entries):
    """The guards of `required` that no selected patch provides, in the order required."""
    provided = {guard for entry in entries for guard in entry.get("guards", [])}
    return [guard for guard in required or [] if guard not in provided]


def graph_guard_refusal(profile, missing):
    """Why a profile with CUDA graphs on and a guard missing is refused, and both ways out."""
    reasons = "; ".join(f"{guard}: {GRAPH_GUARDS.get(guard, 'see the profile')}" for guard in missing)
    return (
        f"Profile {profile} runs CUDA graphs (enforce_eager false) and no patch of engine_patches provides the graph "
        f"guard(s) {', '.join(missing)}. {reasons}. Nothing was changed. Either supply the guard: whole-file patches (the "
        f"recipe's patched sparse_attn_indexer.py and sparse_attn_indexer_kpool.py, bind-mounted as engine_patch_mounts entries "
        f"with the recipe's sha256 and guards: [{', '.join(missing)}]) or a diff in your patches/manifest.yml, "
        f"each with the sha256 of the image's original (playbooks/patch_sources.yml copies the originals out of the image) "
        f"and guards: [{', '.join(missing)}], named in engine_patches; or set engine_enforce_eager: true (no CUDA graphs: "
        f"tiny-prompt E2E ~2.4 s instead of ~1.3 s, recipe.md)."
    )


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
    """The patched text of base_text, or PatchError with patch's own words. Dry run first.

    A whole file is its own result (check_base has already said its base is the image's file)."""
    if entry.get("kind") == "file":
        return entry["file_text"]
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
    image = str(image_id).rsplit(":", maxsplit=1)[-1][:12]
    return f"{entry['name']}/{image}-{entry['entry_sha256'][:12]}-{os.path.basename(entry['target'])}"


def file_sha256(path):
    """The sha256 of a file as the node holds it, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def mounted_file_sums(paths):
    """Path -> sha256 of each file a rank mounts as it is, None where it is not a regular file (missing, a directory).

    Read in the same module run as the patched files, so a rank's mounts cost one round trip per node.
    """
    return {path: file_sha256(path) if os.path.isfile(path) else None for path in paths}
