#!/usr/bin/python
# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Ansible module: patched vLLM files for an engine image, checked against their base."""

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_patch
short_description: Prepare patched vLLM files on a node, to bind-mount into an engine image
version_added: 0.1.0
description:
  - For each patch (from patches/manifest.yml, with its diff or whole file), reads the target file and vLLM's
    version out of the engine image (C(docker run --rm --network none), no vLLM import), refuses when either is
    not what the patch was made against (nothing is written then), applies a diff with GNU patch (C(--dry-run)
    first) or takes a whole file as it is, and writes the result atomically under I(dest_dir), named after the
    image ID and the manifest entry (kind, text, target, version, base), so an edited patch is a new file.
  - Returns the bind mounts C({src, dest}) for the engine. When every patched file for this image and these
    diffs exists already, the image is not started and nothing changes.
  - Supports check mode.
requirements:
  - The docker CLI on the node; GNU patch for diffs.
options:
  image:
    description: The engine image (reference as the engine runs it).
    type: str
    required: true
  patches:
    description:
      - Entries of patches/manifest.yml (name, target, vllm_version, base_sha256) with kind, diff_text or
        file_text, and entry_sha256 (the selected_patches filter adds them).
    type: list
    elements: dict
    required: true
  dest_dir:
    description: Where the patched files are kept on the node.
    type: path
    default: /opt/sparkfleet/patches
  python:
    description: The Python inside the image.
    type: str
    default: python3
  sources:
    description:
      - Files to copy out of the image as they are (paths relative to the directory holding C(vllm), e.g.
        C(vllm/model_executor/layers/sparse_attn_indexer.py)), returned in C(sources) with their sha256, the
        originals a patch is made against (playbooks/patch_sources.yml). Nothing is written for them.
    type: list
    elements: str
    default: []
  read_files:
    description:
      - Files on the node that the rank mounts as they are (the user's whole-file patch mounts, the weights' manifest),
        returned in C(files) with their sha256 (the engine role's fingerprint covers their content; reading them
        here saves a second module run per node).
    type: list
    elements: path
    default: []
attributes:
  check_mode:
    support: full
    details: Says which patched files it would write and writes none.
  diff_mode:
    support: none
  idempotent:
    support: full
extends_documentation_fragment:
  - sparkfleet.vllm.attributes
author:
  - sparkfleet developers (@sparkfleet)
"""

EXAMPLES = r"""
- name: Prepare the profile's patches
  sparkfleet.vllm.vllm_patch:
    image: sparkfleet/vllm-cpu:0.32.0
    patches: "{{ engine_patches }}"
  register: patched

- name: Copy the recipe's two files out of the image, to patch them
  sparkfleet.vllm.vllm_patch:
    image: ghcr.io/tonyd2wild/vllm-glm53-flash:sm121-v8
    patches: []
    sources:
      - vllm/model_executor/layers/sparse_attn_indexer.py
      - vllm/model_executor/layers/sparse_attn_indexer_kpool.py
  register: originals
"""

RETURN = r"""
mounts:
  description:
    - Bind mounts for the engine, patched file on the node to the target inside the image, with the sha256 of the
      file as the node holds it (the engine role's rank attestation compares it across ranks).
  returned: success
  type: list
  elements: dict
  sample: [{"src": "/opt/sparkfleet/patches/sm12x-persistent-topk-guard/3f2a...-9c1d...-indexer_topk.py",
            "dest": "/opt/vllm/lib/python3.11/site-packages/vllm/model_executor/layers/indexer_topk.py",
            "sha256": "9c1d..."}]
image_id:
  description: The image's ID.
  returned: success
  type: str
vllm_version:
  description: vLLM's version in the image, when the image was read (null when every file existed already).
  returned: success
  type: str
files:
  description: Each file of I(read_files) to its sha256, or null where it is not a regular file (missing, a directory).
  returned: success
  type: dict
  sample: {"/var/tmp/sparkfleet/models/tiny-glm/.sparkfleet-manifest.json": "5be0..."}
sources:
  description: Each file of I(sources) as the image holds it, C({sha256, text}), or null when the image has no such file.
  returned: when I(sources) is given
  type: dict
  sample: {"vllm/model_executor/layers/sparse_attn_indexer.py": {"sha256": "4dc9...", "text": "# SPDX-License-Identifier: ..."}}
"""

import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkfleet.vllm.plugins.module_utils import vllm_patches

# Runs inside the image: where vllm is and the targets' text, without importing vllm (seconds on a CPU).
READ_IMAGE = """
import importlib.metadata, importlib.util, json, os, sys
root = os.path.dirname(importlib.util.find_spec("vllm").submodule_search_locations[0])
files = {}
for target in sys.argv[1:]:
    path = os.path.join(root, target)
    files[target] = open(path, encoding="utf-8").read() if os.path.exists(path) else None
print(json.dumps({"version": importlib.metadata.version("vllm"), "root": root, "files": files}))
"""


def main():
    module = AnsibleModule(
        argument_spec={
            "image": {"type": "str", "required": True},
            "patches": {"type": "list", "elements": "dict", "required": True},
            "dest_dir": {"type": "path", "default": "/opt/sparkfleet/patches"},
            "python": {"type": "str", "default": "python3"},
            "sources": {"type": "list", "elements": "str", "default": []},
            "read_files": {"type": "list", "elements": "path", "default": []},
        },
        supports_check_mode=True,
    )
    params = module.params
    files = vllm_patches.mounted_file_sums(params["read_files"])
    rc, out, err = module.run_command(["docker", "image", "inspect", "--format", "{{.Id}}", params["image"]])
    if rc != 0:
        module.fail_json(msg=f"No image {params['image']} on this node: {err.strip()}. Put it there first (engine_image role).")
    image_id = out.strip()
    paths = {entry["name"]: os.path.join(params["dest_dir"], vllm_patches.patched_name(entry, image_id)) for entry in params["patches"]}
    state_file = os.path.join(params["dest_dir"], f"mounts-{image_id.split(':')[-1][:12]}.json")
    recorded = {}
    if os.path.exists(state_file):
        with open(state_file, encoding="utf-8") as handle:
            recorded = json.load(handle)
    if not params["sources"] and all(os.path.isfile(path) and path in recorded for path in paths.values()):
        mounts = [{"src": path, "dest": recorded[path], "sha256": vllm_patches.file_sha256(path)} for path in paths.values()]
        module.exit_json(changed=False, image_id=image_id, vllm_version=None, mounts=mounts, files=files)

    argv = ["docker", "run", "--rm", "--network", "none", "--entrypoint", params["python"], params["image"], "-c", READ_IMAGE]
    rc, out, err = module.run_command(argv + [entry["target"] for entry in params["patches"]] + params["sources"])
    if rc != 0:
        module.fail_json(msg=f"Could not read vLLM's files in {params['image']}: {(err or out).strip()[:500]}")
    found = json.loads(out.strip().splitlines()[-1])
    sources = {
        target: None if found["files"].get(target) is None else {"sha256": vllm_patches.sha256_text(found["files"][target]), "text": found["files"][target]}
        for target in params["sources"]
    }
    if not params["patches"]:
        module.exit_json(changed=False, image_id=image_id, vllm_version=found["version"], mounts=[], sources=sources, files=files)
    problems = [problem for entry in params["patches"] if (problem := vllm_patches.check_base(entry, found["version"], found["files"].get(entry["target"])))]
    if problems:
        module.fail_json(msg=" | ".join(problems), vllm_version=found["version"])
    try:
        patch_bin = module.get_bin_path("patch", required=any(entry.get("kind", "diff") == "diff" for entry in params["patches"]))
        patched = {entry["name"]: vllm_patches.apply(entry, found["files"][entry["target"]], patch_bin) for entry in params["patches"]}
    except vllm_patches.PatchError as error:
        module.fail_json(msg=str(error))
    mounts = [
        {"src": paths[entry["name"]], "dest": os.path.join(found["root"], entry["target"]), "sha256": vllm_patches.sha256_text(patched[entry["name"]])}
        for entry in params["patches"]
    ]
    if not module.check_mode:
        for entry in params["patches"]:
            write_atomically(paths[entry["name"]], patched[entry["name"]])
        recorded.update({mount["src"]: mount["dest"] for mount in mounts})
        write_atomically(state_file, json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    module.exit_json(
        changed=True, image_id=image_id, vllm_version=found["version"], mounts=mounts, files=files, **({"sources": sources} if params["sources"] else {})
    )


def write_atomically(path, text):
    """Never a half-written file under the final name."""
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".partial-")
    with os.fdopen(handle, "w", encoding="utf-8") as stream:
        stream.write(text)
    os.chmod(temporary, 0o644)
    os.replace(temporary, path)


if __name__ == "__main__":
    main()
