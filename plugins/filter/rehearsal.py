# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Filters of the rehearsal (module_utils/rehearsal.py): what Docker made of each rank, and the closing table.

Documented per filter in the YAML files beside this one (ansible-doc -t filter sparkfleet.vllm.NAME).
"""

from __future__ import annotations

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.deferred import deferred
from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filter_errors import as_filters


class FilterModule:
    """sparkfleet.vllm rehearsal filters."""

    def filters(self):
        return as_filters(
            {
                "rehearsed_ranks": deferred("rehearsal", "rank_summaries"),
                "rehearsal_facts": deferred("rehearsal", "node_facts"),
                "rehearsal_rows": deferred("rehearsal", "node_rows"),
                "rehearsal_table": deferred("rehearsal", "table"),
            }
        )
