# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Filter: a readiness timeline (module engine_timeline's JSON) as the lines the engine role prints."""

from __future__ import annotations

DOCUMENTATION = r"""
name: readiness_table
short_description: A launch's readiness timeline as printable lines
version_added: 0.6.0
description:
  - Takes the timeline the C(engine_timeline) module wrote on the head (for each rank the container start, vLLM
    process up, weights loaded, KV cache allocated, graphs captured or compile done, API listening, then
    C(/health) and the first streamed token) and returns the table C(playbooks/status.yml) shows.
positional: _input
options:
  _input:
    description: The timeline (a dict, as read from C(readiness.json)).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Show the last launch's timeline
  ansible.builtin.debug:
    msg: "{{ (slurped.content | b64decode | from_json) | sparkfleet.vllm.readiness_table }}"
"""

RETURN = r"""
_value:
  description: One string per line.
  type: list
  elements: str
"""

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
