# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Filter: a readiness timeline (module engine_timeline's JSON) as the lines the engine role prints.

Documented per filter in the YAML files beside this one (ansible-doc -t filter sparkfleet.vllm.NAME).
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.vllm.plugins.module_utils.readiness import format_timeline


def readiness_table(timeline):
    try:
        return format_timeline(timeline)
    except (KeyError, TypeError, ValueError) as error:
        raise AnsibleFilterError(f"readiness_table: not a readiness timeline ({error}); it is written by engine_timeline") from None


class FilterModule:
    """sparkfleet.vllm readiness filters."""

    def filters(self):
        return {"readiness_table": readiness_table}
