#!/usr/bin/python
# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Ansible module: an engine in or out of the front door's rotation (HAProxy's runtime API)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: front_door_server
short_description: Drain an engine out of the front door before a planned stop, or put it back in rotation
version_added: 0.1.0
description:
  - The front door (HAProxy, role C(sparkfleet.vllm.front_door)) sends each engine's requests to that engine's head,
    one HAProxy server per engine. Before a planned stop of an engine's ranks (a lane switch, a relaunch for a changed
    setting, C(stop.yml)), C(drained) takes the engine out of rotation - HAProxy's DRAIN state, so a new request is
    answered at once with 503 and C(Retry-After) when no other engine can take it - and waits while the requests it
    holds run to their end, up to I(timeout_s). What is still in flight then is cut (HAProxy's C(shutdown sessions)),
    so that its client sees the stream broken, never a silent end. It returns how many it waited for and how many it
    cut.
  - C(ready) puts the engine back in rotation once it serves again (HAProxy's health check still decides whether it is
    up). Both talk to HAProxy's stats socket, which the role configures at admin level.
options:
  state:
    description: C(drained) takes the engine out of rotation and waits for its requests; C(ready) puts it back.
    type: str
    choices: [drained, ready]
    required: true
  socket:
    description: HAProxy's stats socket (admin level).
    type: path
    default: /run/haproxy/sparkfleet.sock
  backend:
    description: The HAProxy backend of the front door.
    type: str
    default: engines
  server:
    description: The engine's server in that backend (the engine group's name).
    type: str
    required: true
  timeout_s:
    description: With C(drained), how long to wait for the requests in flight before cutting the rest.
    type: int
    default: 120
extends_documentation_fragment:
  - sparkfleet.vllm.attributes
attributes:
  check_mode:
    support: full
    details: Reads the server's state and changes nothing.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: A drained engine is not drained again; a server in rotation is left as it is.
author:
  - sparkfleet developers (@sparkfleet)
"""

EXAMPLES = r"""
- name: Drain engine sparks before its ranks stop
  sparkfleet.vllm.front_door_server:
    state: drained
    server: sparks
    timeout_s: 120
  delegate_to: spark1
  become: true

- name: Put it back in rotation once it serves
  sparkfleet.vllm.front_door_server:
    state: ready
    server: sparks
  delegate_to: spark1
  become: true
"""

RETURN = r"""
waited_for:
  description: With C(drained), the requests in flight on the engine when the drain began.
  returned: state is drained
  type: int
  sample: 2
cut:
  description: With C(drained), the requests still in flight at I(timeout_s), cut.
  returned: state is drained
  type: int
  sample: 0
seconds:
  description: With C(drained), how long the drain took.
  returned: state is drained
  type: float
status_before:
  description:
    - HAProxy's status of the server before this task (C(UP), C(DOWN), C(DRAIN), C(MAINT), ...).
    - C(absent) when the front door has no server for this engine yet (added or renamed since its configuration was
      written); nothing of it went through the front door, so nothing is drained or put back.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkfleet.vllm.plugins.module_utils import haproxy_admin


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["drained", "ready"], "required": True},
            "socket": {"type": "path", "default": "/run/haproxy/sparkfleet.sock"},
            "backend": {"type": "str", "default": "engines"},
            "server": {"type": "str", "required": True},
            "timeout_s": {"type": "int", "default": 120},
        },
        supports_check_mode=True,
    )
    params = module.params
    admin = haproxy_admin.Admin(params["socket"])
    try:
        before = admin.find(params["backend"], params["server"]) or {"status": haproxy_admin.ABSENT, "scur": 0}
        if module.check_mode:
            module.exit_json(changed=False, status_before=before["status"], waited_for=before["scur"], cut=0, seconds=0.0)
        if params["state"] == "drained":
            module.exit_json(**haproxy_admin.drain(admin, params["backend"], params["server"], params["timeout_s"]))
        module.exit_json(changed=haproxy_admin.ready(admin, params["backend"], params["server"]), status_before=before["status"])
    except haproxy_admin.HaproxyAdminError as error:
        module.fail_json(msg=str(error))


if __name__ == "__main__":
    main()
