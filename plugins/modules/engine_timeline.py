#!/usr/bin/python
# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Build the readiness timeline of a launch and measure its first streamed token."""

from __future__ import annotations

DOCUMENTATION = r"""
module: engine_timeline
short_description: Where a launch's time went, rank by rank, up to the first streamed token
version_added: 0.1.0
description:
  - Runs on the head right after C(/health) first answered. Sends one streamed chat completion (the first
    request the new engine serves, so it pays for anything done lazily at the first request) and takes the
    time its first token arrived.
  - Reads every rank's phases from the engine's own log lines as Docker stamped them
    (C(docker logs --timestamps)) and from the container's start time (vLLM process up, weights loaded,
    KV cache allocated, graphs captured or compile done, API listening), then C(/health) and the first token.
    Times are seconds after the first rank's container started.
  - Writes the timeline as JSON to I(path) on the head, where C(playbooks/status.yml) reads the last one.
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
  first_token:
    description: Measure the first streamed token (off for a launch that failed).
    type: bool
    default: true
  timeout_s:
    description: How long the first token may take (the first request may compile kernels).
    type: float
    default: 600
  path:
    description: Where the timeline is written as JSON (replaced atomically).
    type: path
    required: true
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
  - sparkfleet.vllm.engine_api
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
    url: http://127.0.0.1:8000
    model: glm-5.3-flash
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
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

from ansible_collections.sparkfleet.vllm.plugins.module_utils.readiness import TimelineError, build_timeline, format_timeline
from ansible_collections.sparkfleet.vllm.plugins.module_utils.stream_bench import SSEDecoder


def first_token_time(url: str, model: str, api_key: str, timeout_s: float) -> tuple[float | None, str]:
    """Epoch time of the first streamed token (content or reasoning), or None and why."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Reply with exactly: PING-OK"}],
        "max_tokens": 4,
        "stream": True,
        "chat_template_kwargs": {"enable_thinking": False},
    }
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = "Bearer " + api_key
    decoder = SSEDecoder()
    try:
        response = open_url(url.rstrip("/") + "/v1/chat/completions", data=json.dumps(body), headers=headers, method="POST", timeout=timeout_s)
        for line in response:
            data = decoder.feed_line(line.decode("utf-8", errors="replace"))
            if data is None or data == "[DONE]":
                continue
            for choice in json.loads(data).get("choices") or []:
                delta = choice.get("delta") or {}
                if delta.get("content") or delta.get("reasoning") or delta.get("reasoning_content"):
                    return time.time(), ""
    except Exception as error:  # the timeline is still written; the probe after it judges health
        return None, f"no first token: {type(error).__name__}: {error}"
    return None, "the stream ended without a token"


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
            "first_token": {"type": "bool", "default": True},
            "url": {"type": "str", "required": True},
            "model": {"type": "str", "required": True},
            "api_key": {"type": "str", "no_log": True},
            "timeout_s": {"type": "float", "default": 600},
            "path": {"type": "path", "required": True},
        },
        supports_check_mode=True,
    )
    params = module.params
    if module.check_mode:
        module.exit_json(changed=False, timeline={}, table=[])
    first_token_at, first_token_error = None, ""
    if params["first_token"]:
        first_token_at, first_token_error = first_token_time(params["url"], params["model"], params["api_key"] or "", params["timeout_s"])
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
