# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Filters: a profile's patch names -> manifest entries with their diffs or whole files (read on the
controller); the graph guards a profile with CUDA graphs needs, checked against them."""

from __future__ import annotations

DOCUMENTATION = r"""
name: selected_patches
short_description: The manifest entries and diffs of the patches a profile names
version_added: 0.3.0
description:
  - Reads patches/manifest.yml and the named diffs or whole files on the controller and checks the entries
    (required keys, exactly one of diff or file, a 64-digit base_sha256, a target under vllm/, guards a list).
    Unknown names, missing files and two patches of one target fail, naming them.
  - The collection's second patch filter, C(checked_graph_guards), takes these entries, the profile's
    C(cuda_graph_guards), C(enforce_eager) and the profile's name; it fails with both ways out (supply the guard,
    or C(engine_enforce_eager=true)) when CUDA graphs are on and a required guard is not provided, else returns
    the guards provided.
positional: names
options:
  names:
    description: Patch names, in order.
    type: list
    elements: str
    required: true
  patches_dir:
    description: The directory holding manifest.yml, the diffs and the whole files.
    type: path
    required: true
"""

EXAMPLES = r"""
patches: "{{ ['sm12x-persistent-topk-guard'] | sparkfleet.vllm.selected_patches(role_path ~ '/../../patches') }}"
guards: "{{ patches | sparkfleet.vllm.checked_graph_guards(['persistent_topk'], false, 'gb10') }}"
"""

RETURN = r"""
_value:
  description: Entries with kind (diff or file), diff_text or file_text, and entry_sha256 (what a patched file depends on) added.
  type: list
  elements: dict
"""

import os

import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.vllm.plugins.module_utils import vllm_patches


def selected_patches(names, patches_dir):
    try:
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
    except (OSError, yaml.YAMLError, vllm_patches.PatchError) as error:
        raise AnsibleFilterError(f"patches: {error}") from error


def checked_graph_guards(entries, required, enforce_eager, profile):
    """The guards the entries provide; fails naming both ways out when graphs are on and one is missing."""
    missing = [] if enforce_eager else vllm_patches.missing_graph_guards(required, entries)
    if missing:
        raise AnsibleFilterError(vllm_patches.graph_guard_refusal(profile, missing))
    return sorted({guard for entry in entries for guard in entry.get("guards", [])})


class FilterModule:
    """sparkfleet.vllm patch filters."""

    def filters(self):
        return {"selected_patches": selected_patches, "checked_graph_guards": checked_graph_guards}
