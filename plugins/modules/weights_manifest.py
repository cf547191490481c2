#!/usr/bin/python
# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Ansible module: the weights' sha256 manifest, made on the head and checked on every node."""

from __future__ import annotations

DOCUMENTATION = r"""
module: weights_manifest
short_description: Make the weights' sha256 manifest on the head; check a node against it; commit received files
version_added: 0.1.0
description:
  - C(state=build) (the head) lists every file of the weights directory with its size and sha256 and writes
    the manifest beside the weights (C(.sparkfleet-manifest.json) in the directory).
  - C(state=verify) (a worker) compares the node's files with the head's I(manifest) and returns what is
    missing, of another size or another sha256, and extra. When nothing is missing it stores the head's
    manifest on the node.
  - C(state=commit) (a worker, after a fan-out) checks every received file in the staging directory against
    the manifest, moves the good ones under their final names (atomic rename), deletes the bad ones and fails
    naming them. Nothing half-written ever carries a final name.
  - Hashing is incremental; each node keeps what it last verified (size, mtime, sha256 per file) and only
    re-hashes files whose size or mtime changed; I(full=true) re-hashes everything.
options:
  path:
    description: The weights directory on the node.
    type: path
    required: true
  state:
    description: What to do (see the description).
    type: str
    choices: [build, verify, commit]
    required: true
  manifest:
    description: The head's manifest (the C(manifest) that C(state=build) returned). For verify and commit.
    type: dict
  names:
    description: For commit, the files that were sent (relative paths).
    type: list
    elements: str
    default: []
  source:
    description: For build, where the weights came from (repository, revision), stored in the manifest.
    type: dict
    default: {}
  full:
    description: Re-hash every file, not only those whose size or mtime changed.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    details: Hashes and compares; stores no manifest and commits no file.
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
- name: Make the manifest on the head
  sparkfleet.vllm.weights_manifest:
    path: /var/tmp/models/glm53-flash-fp8
    state: build
    source: {repo: dealignai/GLM-5.3-Flash-UNCENSORED-FP8, revision: main}
  register: head_manifest

- name: Check a worker against it
  sparkfleet.vllm.weights_manifest:
    path: /var/tmp/models/glm53-flash-fp8
    state: verify
    manifest: "{{ hostvars[sparkfleet_head].head_manifest.manifest }}"
  register: worker_weights
"""

RETURN = r"""
manifest:
  description: For build, the manifest (source, files with size and sha256, total_bytes).
  returned: state=build
  type: dict
missing:
  description: Files of the manifest the node lacks.
  returned: state=verify
  type: list
  elements: str
wrong:
  description: Files whose size or sha256 differs from the manifest's.
  returned: state=verify
  type: list
  elements: str
extra:
  description: Files the node has that the manifest does not list (left in place).
  returned: state=verify
  type: list
  elements: str
needed:
  description: missing + wrong, the files to send.
  returned: state=verify
  type: list
  elements: str
needed_bytes:
  description: Their total size.
  returned: state=verify
  type: int
hashed:
  description: How many files were hashed (the others were known unchanged).
  returned: state in (build, verify)
  type: int
committed:
  description: For commit, the files now under their final names.
  returned: state=commit
  type: list
  elements: str
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkfleet.vllm.plugins.module_utils import weights_manifest


def _stored_manifest(path: str) -> dict:
    try:
        with open(os.path.join(path, weights_manifest.MANIFEST_NAME), encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


def _store_manifest(path: str, manifest: dict) -> bool:
    """Write the manifest when it differs from the stored one; True when written."""
    if _stored_manifest(path) == manifest:
        return False
    weights_manifest.write_json(os.path.join(path, weights_manifest.MANIFEST_NAME), manifest)
    return True


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "state": {"type": "str", "choices": ["build", "verify", "commit"], "required": True},
            "manifest": {"type": "dict"},
            "names": {"type": "list", "elements": "str", "default": []},
            "source": {"type": "dict", "default": {}},
            "full": {"type": "bool", "default": False},
        },
        required_if=[("state", "verify", ["manifest"]), ("state", "commit", ["manifest"])],
        supports_check_mode=True,
    )
    params = module.params
    path, state = params["path"], params["state"]
    if state == "build" and not os.path.isdir(path):
        module.fail_json(msg=f"no weights directory {path} on the head: download or generate the weights first")
    try:
        if state == "build":
            files, hashed = weights_manifest.scan(path, full=params["full"])
            if not files:
                module.fail_json(msg=f"the weights directory {path} on the head holds no files")
            manifest = weights_manifest.manifest_from_scan(files, params["source"])
            changed = False if module.check_mode else _store_manifest(path, manifest)
            module.exit_json(changed=changed, manifest=manifest, hashed=hashed)
        if state == "verify":
            files, hashed = weights_manifest.scan(path, full=params["full"]) if os.path.isdir(path) else ({}, 0)
            difference = weights_manifest.compare(params["manifest"], files)
            changed = False
            if not difference["needed"] and not module.check_mode:
                changed = _store_manifest(path, params["manifest"])
            module.exit_json(changed=changed, hashed=hashed, **difference)
        committed = weights_manifest.commit_staged(path, params["manifest"], params["names"])
        _store_manifest(path, params["manifest"])
        module.exit_json(changed=bool(committed), committed=committed)
    except weights_manifest.ManifestError as error:
        module.fail_json(msg=f"{path}: {error}")


if __name__ == "__main__":
    main()
