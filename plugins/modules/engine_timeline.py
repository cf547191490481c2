#!/usr/bin/python
# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Build the readiness timeline of a launch up to its first streamed token (measured by the launch's wait)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: engine_timeline
short_description: Where a launch's time went, rank by rank, up to the first streamed token
version_added: 0.1.0
description:
  - Runs on the head after the launch's wait (the engine role's C(wait_ready.py), which asks for one streamed completion
    right after C(/health) first answers - the first request the new engine serves, so it pays for anything done lazily at
    the first request) and places its first token in the timeline.
  - Reads every rank's phases from the engine's own log lines as Docker stamped them
    (C(docker logs --timestamps)) and from the container's start time (vLLM process up, weights loaded,
    KV cache allocated, graphs captured or compile done, API listening), then C(/health) and the first token.
    Times are seconds after the first rank's container started.
  - Writes the timeline as JSON to I(path) on the head, where C(playbooks/status.yml) reads the last one, with the
    launch's rank attestation when given.
options:
  ranks:
    description: One entry per rank, as gathered on its node.
    type: list
    elements: dict
    required: true
    suboptions:
      node: {description: The node's inventory name., type: str, required: true}
      rank: {description: Its node rank (0 = head)., type: int, required: true}
      started_at: {description: "Docker's C(State.StartedAt) of its container.", type: str, required: true}
      log: {description: "C(docker logs --timestamps) of its container.", type: str, default: ""}
  engine:
    description: The engine group's name.
    type: str
    required: true
  lane:
    description: The lane launched.
    type: str
    required: true
  health_at:
    description: When C(/health) first answered 200, in seconds since the epoch (the head's clock).
    type: float
  first_token_at:
    description: When the first streamed token came, in seconds since the epoch (the head's clock); none for a launch that failed.
    type: float
  first_token_error:
    description: Why there is no first token (kept in the timeline).
    type: str
    default: ""
  path:
    description: Where the timeline is written as JSON (replaced atomically).
    type: path
    required: true
  attestation:
    description:
      - What every rank of this launch attested (the engine role's rank parity record), kept in the same record as
        C(attestation), so that one file on the head and one under the controller's reports/ tie the launch's times
        to what it runs.
    type: dict
    version_added: 0.1.0
notes:
  - Check mode builds nothing and writes nothing.
  - The node's clock and Docker's stamps are the same clock (the head's), so the phases and the first token are
    comparable; the workers' stamps depend on the nodes' clocks agreeing (preflight checks time sync).
attributes:
  check_mode:
    support: partial
    details: Check mode reads nothing and returns an empty timeline.
  diff_mode:
    support: N/A
    details: It only reads.
  idempotent:
    support: full
extends_documentation_fragment:
  - sparkfleet.vllm.attributes
author: sparkfleet developers (@sparkfleet)
"""

EXAMPLES = r"""
- name: Time the launch
  sparkfleet.vllm.engine_timeline:
    ranks:
      - {node: spark1, rank: 0, started_at: "2026-11-30T18:47:19.1Z", log: "{{ head_log }}"}
    engine: sparks
    lane: 500k
    health_at: 1764528500.2
    first_token_at: 1764528501.9
    path: /opt/sparkfleet/readiness.json
  register: engine_timeline
"""

RETURN = r"""
timeline:
  description: Per rank, each phase's seconds after the first container start (null when absent), health, first token.
  returned: success
  type: dict
table:
  description: The same as printed lines.
  returned: success
  type: list
  elements: str
"""

import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkfleet.vllm.plugins.module_utils.readiness import TimelineError, build_timeline, format_timeline


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "ranks": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": {
                    "node": {"type": "str", "required": True},
                    "rank": {"type": "int", "required": True},
                    "started_at": {"type": "str", "required": True},
                    "log": {"type": "str", "default": ""},
                },
            },
            "engine": {"type": "str", "required": True},
            "lane": {"type": "str", "required": True},
            "health_at": {"type": "float"},
            # A time and a reason about a streamed token, not a credential.
            "first_token_at": {"type": "float", "no_log": False},
            "first_token_error": {"type": "str", "default": "", "no_log": False},
            "path": {"type": "path", "required": True},
            "attestation": {"type": "dict"},
        },
        supports_check_mode=True,
    )
    params = module.params
    if module.check_mode:
        module.exit_json(changed=False, timeline={}, table=[])
    first_token_at = params["first_token_at"]
    first_token_error = "" if first_token_at is not None else params["first_token_error"] or "not measured"
    try:
        timeline = build_timeline(
            params["ranks"],
            engine=params["engine"],
            lane=params["lane"],
            health_at=params["health_at"],
            first_token_at=first_token_at,
            first_token_error=first_token_error,
        )
    except TimelineError as error:
        module.fail_json(msg=f"The readiness timeline could not be built: {error}")
        return
    if params["attestation"]:
        timeline["attestation"] = params["attestation"]
    directory = os.path.dirname(params["path"])
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".readiness.")
    with os.fdopen(handle, "w") as stream:
        json.dump(timeline, stream, indent=2)
    os.chmod(temporary, 0o644)
    os.replace(temporary, params["path"])
    # A new timeline for a new launch: the launch itself is the change, not this record.
    module.exit_json(changed=False, timeline=timeline, table=format_timeline(timeline))


if __name__ == "__main__":
    main()
