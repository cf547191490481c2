# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Filters: the ranks' caches on the node, one directory per engine image (docs/warm-boots.md).

Documented per filter in the YAML files beside this one (ansible-doc -t filter sparkfleet.vllm.NAME).
"""

from __future__ import annotations

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.deferred import deferred
from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filter_errors import as_filters


class FilterModule:
    """sparkfleet.vllm engine cache filters."""

    def filters(self):
        return as_filters({"image_cache_name": deferred("engine_cache", "image_cache_name"), "image_caches_to_prune": deferred("engine_cache", "to_prune")})
