# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Filters: a profile's patch names -> manifest entries with their diffs or whole files (read on the
controller); the graph guards a profile with CUDA graphs needs, checked against them."""

from __future__ import annotations

import os

import yaml

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.deferred import module_utils
from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filter_errors import as_filters


def selected_patches(names, patches_dir):
    """The manifest entries of the named patches, each with its diff or whole file read from patches_dir."""
    vllm_patches = module_utils("vllm_patches")
    with open(os.path.join(patches_dir, "manifest.yml"), encoding="utf-8") as handle:
        manifest = yaml.safe_load(handle)
    texts = {}
    for entry in (manifest or {}).get("patches") or []:
        for kind in vllm_patches.KINDS:
            path = os.path.join(patches_dir, str(entry.get(kind) or ""))
            if entry.get("name") in names and entry.get(kind) and os.path.isfile(path):
                with open(path, encoding="utf-8") as handle:
                    texts[entry[kind]] = handle.read()
    return vllm_patches.select(manifest, names, texts)


def checked_graph_guards(entries, required, enforce_eager, profile, mounts=None):
    """The guards the entries (and the sha256-pinned engine_patch_mounts) provide; fails naming both ways out when
    graphs are on and one is missing."""
    vllm_patches = module_utils("vllm_patches")
    entries = list(entries) + vllm_patches.mount_guard_entries(mounts)
    missing = [] if enforce_eager else vllm_patches.missing_graph_guards(required, entries)
    if missing:
        raise vllm_patches.PatchError(vllm_patches.graph_guard_refusal(profile, missing))
    return sorted({guard for entry in entries for guard in entry.get("guards", [])})


class FilterModule:
    """sparkfleet.vllm patch filters."""

    def filters(self):
        # Reading the manifest can fail too (a missing file, bad YAML): named as the patches' error.
        return {
            **as_filters({"selected_patches": selected_patches}, OSError, yaml.YAMLError, ValueError, describe=lambda error: f"patches: {error}"),
            **as_filters({"checked_graph_guards": checked_graph_guards}),
        }
