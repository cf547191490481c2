# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Filters of the engine_image role: settings check, per-node plan, disk room, build-context fingerprint.

Documented per filter in the YAML files beside this one (ansible-doc -t filter sparkfleet.vllm.NAME).
"""

from __future__ import annotations

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.deferred import deferred, module_utils
from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filter_errors import as_filters


def image_source_warnings(reference, source, require_digest=False, tarball="", context=""):
    """Warnings about the image settings; a bad setting fails with its fix."""
    engine_image = module_utils("engine_image")
    return engine_image.check_source(source, reference, require_digest=bool(require_digest), tarball=tarball or "", context=context or "")


def image_pulled_digest_ok(repo_digests, reference):
    """True, or fails naming the digests when the pulled image is not the pinned one."""
    engine_image = module_utils("engine_image")
    engine_image.check_pulled_digest(reference, list(repo_digests or []))
    return True


def image_plan(nodes, head, members):
    """Which workers are equal, need a re-tag, or need the image sent."""
    engine_image = module_utils("engine_image")
    return engine_image.plan(head, list(members), dict(nodes))


def disk_shortfalls(free_bytes, required_bytes, reserve_bytes=0):
    """Messages naming each node without room, with free and required sizes (required: one size or node -> size)."""
    engine_image = module_utils("engine_image")
    required = {node: int(size) for node, size in required_bytes.items()} if isinstance(required_bytes, dict) else int(required_bytes)
    free = {node: int(size) for node, size in dict(free_bytes).items()}
    return engine_image.disk_shortfalls(required, free, int(reserve_bytes))


def context_fingerprint(path, cache_dir=""):
    """sha256 over a build context's relative paths and contents (the controller's copy), kept in cache_dir if given."""
    engine_image = module_utils("engine_image")
    return engine_image.context_fingerprint(path, cache_dir=cache_dir or "")


class FilterModule:
    """sparkfleet.vllm engine image filters."""

    def filters(self):
        return as_filters(
            {
                "image_source_warnings": image_source_warnings,
                "image_pulled_digest_ok": image_pulled_digest_ok,
                "image_plan": image_plan,
                "disk_shortfalls": disk_shortfalls,
                "context_fingerprint": context_fingerprint,
                "image_local_reference": deferred("engine_image", "local_reference"),
                "image_digest_reference": deferred("engine_image", "digest_reference"),
            }
        )
