#!/usr/bin/python
# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Count failed health probes on the head and decide when the engine is relaunched."""

from __future__ import annotations

DOCUMENTATION = r"""
module: engine_watch
short_description: Apply the recipe's recovery rule to one health probe of the engine
version_added: 0.1.0
description:
  - Runs on the head. Keeps, in I(state_dir), how many probes in a row failed and when the engine was last
    relaunched, and appends every event (failure, relaunch, cap reached, recovery, outcome of a relaunch)
    to C(events.jsonl) there.
  - With I(healthy) set it judges one probe; with I(outcome) set it records how a relaunch it asked for
    ended. A healthy probe on a healthy engine writes nothing (changed=false).
  - The relaunch itself is the engine role's ordered relaunch; playbooks/watch.yml runs it when this module
    answers C(relaunch).
options:
  state_dir:
    description: Directory for C(state.json) and C(events.jsonl) (created when needed).
    type: path
    default: /opt/sparkfleet/watch
  healthy:
    description: This probe's verdict (every rank up and a one-token completion answered).
    type: bool
  reason:
    description: What failed, for the event log (no secrets).
    type: str
    default: ""
  failures_before_relaunch:
    description: Failed probes in a row before a relaunch (the recipe uses 3).
    type: int
    default: 3
  max_relaunches_per_hour:
    description: Relaunches allowed in any hour; past it, failures are logged as C(capped) and nothing is restarted.
    type: int
    default: 2
  outcome:
    description: Record how the relaunch ended instead of judging a probe.
    type: str
    choices: [relaunched, relaunch_failed]
  detail:
    description: Text kept with an I(outcome) (the failure's message).
    type: str
    default: ""
notes:
  - Check mode reports the decision without writing the state or the log.
attributes:
  check_mode:
    support: full
    details: Returns the decision without recording the probe.
  diff_mode:
    support: none
  idempotent:
    support: none
    details: Each call records one probe; the failure count and the event log move on.
extends_documentation_fragment:
  - sparkfleet.vllm.attributes
author: sparkfleet developers (@sparkfleet)
"""

EXAMPLES = r"""
- name: Count this probe
  sparkfleet.vllm.engine_watch:
    healthy: "{{ engine_probe_ok and engine_ranks_up }}"
    reason: "spark3: exited"
    failures_before_relaunch: 3
    max_relaunches_per_hour: 2
  register: watch

- name: Record the relaunch
  sparkfleet.vllm.engine_watch:
    outcome: relaunched
  when: watch.decision == 'relaunch'
"""

RETURN = r"""
decision:
  description: healthy, recovered, failing, relaunch or capped (or the recorded outcome).
  returned: always
  type: str
  sample: failing
failures:
  description: Failed probes in a row after this one.
  returned: always
  type: int
  sample: 2
relaunches_last_hour:
  description: Relaunches counted in the last hour (including one decided now).
  returned: always
  type: int
  sample: 1
event:
  description: The event appended to the log, or null when nothing was logged.
  returned: always
  type: dict
  sample: {"time": "2026-11-30T08:00:00Z", "decision": "failing", "failures": 2, "reason": "spark3: exited"}
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkfleet.vllm.plugins.module_utils import watchdog


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "state_dir": {"type": "path", "default": "/opt/sparkfleet/watch"},
            "healthy": {"type": "bool"},
            "reason": {"type": "str", "default": ""},
            "failures_before_relaunch": {"type": "int", "default": 3},
            "max_relaunches_per_hour": {"type": "int", "default": 2},
            "outcome": {"type": "str", "choices": ["relaunched", "relaunch_failed"]},
            "detail": {"type": "str", "default": ""},
        },
        required_one_of=[["healthy", "outcome"]],
        mutually_exclusive=[["healthy", "outcome"]],
        supports_check_mode=True,
    )
    params = module.params
    state_path = os.path.join(params["state_dir"], "state.json")
    log_path = os.path.join(params["state_dir"], "events.jsonl")
    now = time.time()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
    try:
        failures, cap = watchdog.checked_policy(params["failures_before_relaunch"], params["max_relaunches_per_hour"])
        state = watchdog.load_state(state_path)
    except watchdog.WatchError as error:
        module.fail_json(msg=str(error))

    if params["outcome"]:
        event = {"time": stamp, "decision": params["outcome"], "detail": params["detail"]}
        if not module.check_mode:
            watchdog.append_event(log_path, event)
        recent = [t for t in state["relaunches"] if now - t < watchdog.HOUR_S]
        module.exit_json(changed=True, decision=params["outcome"], failures=state["failures"], relaunches_last_hour=len(recent), event=event)

    new_state, decision = watchdog.judge(state, params["healthy"], now, failures, cap)
    event = None
    if decision != "healthy":
        event = {"time": stamp, "decision": decision, "failures": new_state["failures"], "reason": params["reason"]}
        if decision == "capped":
            event["reason"] += f" (cap: {cap} relaunches per hour reached; nothing restarted)"
    changed = new_state != state
    if not module.check_mode:
        if changed:
            watchdog.save_state(state_path, new_state)
        if event:
            watchdog.append_event(log_path, event)
    module.exit_json(
        changed=changed or event is not None,
        decision=decision,
        failures=new_state["failures"],
        relaunches_last_hour=len(new_state["relaunches"]),
        event=event,
    )


if __name__ == "__main__":
    main()
