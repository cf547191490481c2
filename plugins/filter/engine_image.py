# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Filters of the engine_image role: settings check, per-node plan, disk room, build-context fingerprint.

Documented per filter in the YAML files beside this one (ansible-doc -t filter sparkfleet.vllm.NAME).
"""

from __future__ import annotations

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


def context_fingerprint(path, cache_dir=""):
    """sha256 over a build context's relative paths and contents (the controller's copy), kept in cache_dir if given."""
    try:
        return engine_image.context_fingerprint(path, cache_dir=cache_dir or "")
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
