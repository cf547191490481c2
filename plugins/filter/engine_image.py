# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Filters of the engine_image role: settings check, per-node plan, disk room, build-context fingerprint."""

from __future__ import annotations

DOCUMENTATION = r"""
name: image_plan
short_description: Judge every worker's engine image against the head's
version_added: 0.4.0
description:
  - Takes every node's image ID under the engine's name ("" when absent) and whether the node holds the
    head's ID under any name; returns C({head_id, same, retag, send, different}); see module_utils/engine_image.py.
  - The same file provides C(image_source_warnings) (settings check), C(image_pulled_digest_ok),
    C(disk_shortfalls), C(image_local_reference) (NAME:TAG without the digest, what every node runs),
    C(image_digest_reference) (NAME@sha256:..., what a pull by digest is filed under) and
    C(context_fingerprint) (sha256 of a build context on the controller).
positional: nodes
options:
  nodes:
    description: Node name to C({id, holds_head}) (id "" when the node has no image under the engine's name).
    type: dict
    required: true
  head:
    description: The head's inventory name.
    type: str
    required: true
  members:
    description: The engine's nodes, head first.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
plan: "{{ {'spark1': {'id': 'sha256:aa', 'holds_head': true}, 'spark2': {'id': '', 'holds_head': false}}
          | sparkfleet.vllm.image_plan('spark1', ['spark1', 'spark2']) }}"
"""

RETURN = r"""
_value:
  description: head_id; same, retag and send (lists of nodes); different (node to its other image ID).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.vllm.plugins.module_utils import engine_image


def image_source_warnings(reference, source, require_digest=False, tarball="", context=""):
    """Warnings about the image settings; a bad setting fails with its fix."""
    try:
        return engine_image.check_source(source, reference, require_digest=bool(require_digest), tarball=tarball or "", context=context or "")
    except engine_image.ImageSourceError as error:
        raise AnsibleFilterError(str(error)) from error


def image_pulled_digest_ok(repo_digests, reference):
    """True, or fails naming the digests when the pulled image is not the pinned one."""
    try:
        engine_image.check_pulled_digest(reference, list(repo_digests or []))
    except engine_image.ImageSourceError as error:
        raise AnsibleFilterError(str(error)) from error
    return True


def image_plan(nodes, head, members):
    """Which workers are equal, need a re-tag, or need the image sent."""
    try:
        return engine_image.plan(head, list(members), dict(nodes))
    except engine_image.ImageSourceError as error:
        raise AnsibleFilterError(str(error)) from error


def disk_shortfalls(free_bytes, required_bytes, reserve_bytes=0):
    """Messages naming each node without room, with free and required sizes (required: one size or node -> size)."""
    required = {node: int(size) for node, size in required_bytes.items()} if isinstance(required_bytes, dict) else int(required_bytes)
    free = {node: int(size) for node, size in dict(free_bytes).items()}
    return engine_image.disk_shortfalls(required, free, int(reserve_bytes))


def context_fingerprint(path):
    """sha256 over a build context's relative paths and contents (the controller's copy)."""
    try:
        return engine_image.context_fingerprint(path)
    except engine_image.ImageSourceError as error:
        raise AnsibleFilterError(str(error)) from error


def image_digest_reference(reference):
    """NAME@sha256:... of a pinned reference (what Docker files a pull by digest under)."""
    try:
        return engine_image.digest_reference(reference)
    except engine_image.ImageSourceError as error:
        raise AnsibleFilterError(str(error)) from error


def image_local_reference(reference):
    """The name every node runs: NAME:TAG without the digest (docker save/load keeps tags, not digests)."""
    try:
        return engine_image.local_reference(reference)
    except engine_image.ImageSourceError as error:
        raise AnsibleFilterError(str(error)) from error


class FilterModule:
    def filters(self):
        return {
            "image_source_warnings": image_source_warnings,
            "image_pulled_digest_ok": image_pulled_digest_ok,
            "image_plan": image_plan,
            "disk_shortfalls": disk_shortfalls,
            "context_fingerprint": context_fingerprint,
            "image_local_reference": image_local_reference,
            "image_digest_reference": image_digest_reference,
        }
