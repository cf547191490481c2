# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Filter: a readiness timeline (module engine_timeline's JSON) as the lines the engine role prints.

Documented per filter in the YAML files beside this one (ansible-doc -t filter sparkfleet.vllm.NAME).
"""

from __future__ import annotations

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.deferred import deferred
from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filter_errors import as_filters


class FilterModule:
    """sparkfleet.vllm readiness filters."""

    def filters(self):
        return as_filters(
            {"readiness_table": deferred("readiness", "format_timeline")},
            KeyError,
            TypeError,
            ValueError,
            describe=lambda error: f"readiness_table: not a readiness timeline ({error}); it is written by engine_timeline",
        )
