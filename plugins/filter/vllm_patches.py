# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Filter: a profile's patch names -> manifest entries with their diffs (read on the controller)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: selected_patches
short_description: The manifest entries and diffs of the patches a profile names
version_added: 0.3.0
description:
  - Reads patches/manifest.yml and the named diffs on the controller and checks the entries (required keys,
    a 64-digit base_sha256, a target under vllm/). Unknown names and missing diffs fail, naming them.
positional: names
options:
  names:
    description: Patch names, in order.
    type: list
    elements: str
    required: true
  patches_dir:
    description: The directory holding manifest.yml and the diffs.
    type: path
    required: true
"""

EXAMPLES = r"""
patches: "{{ ['sm12x-persistent-topk-guard'] | sparkfleet.vllm.selected_patches(role_path ~ '/../../patches') }}"
"""

RETURN = r"""
_value:
  description: Entries with diff_text and entry_sha256 (what a patched file depends on) added.
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
        diffs = {}
        for entry in (manifest or {}).get("patches") or []:
            path = os.path.join(patches_dir, str(entry.get("diff", "")))
            if entry.get("name") in names and os.path.isfile(path):
                with open(path, encoding="utf-8") as handle:
                    diffs[entry["diff"]] = handle.read()
        return vllm_patches.select(manifest, names, diffs)
    except (OSError, yaml.YAMLError, vllm_patches.PatchError) as error:
        raise AnsibleFilterError(f"patches: {error}") from error


class FilterModule:
    """sparkfleet.vllm patch filters."""

    def filters(self):
        return {"selected_patches": selected_patches}
