#!/usr/bin/python
# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Ansible module: one run at a time, the lock record on an engine's head (plugins/action/run_lock.py drives it)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: run_lock
short_description: Take or release the lock that lets one run at a time change a cluster
version_added: 0.1.0
description:
  - A run that changes a cluster takes a lock on its engine's head first - a record of who holds it (the controller,
    its ansible-playbook process, the user, the playbook, since when) - and releases it at its end. A second run is
    refused at once, naming the holder. A lock whose holder is gone (its ansible-playbook process no longer runs on
    this controller - killed, or ended by a failure) is taken over, and the run says so. A holder that ran on another
    controller cannot be seen from this one, so its lock is taken over only when I(take_over) names its run.
  - The action plugin of the same name runs on the controller (it knows the run and whether a holder still runs)
    and calls this module on the head for the file work, under an flock of a guard file beside the record.
  - In check mode it takes nothing (a C(--check) run changes nothing) and only reads.
options:
  state:
    description:
      - C(held) takes the lock for this run (again, harmlessly, if this run holds it).
      - C(released) releases it if this run holds it, and only in the playbook the run was started with (I(playbook)),
        so that a playbook imported by another does not release its caller's lock.
      - C(read) only returns the holder.
    type: str
    choices: [held, released, read]
    default: held
  path:
    description: The lock record on the head.
    type: path
    default: /var/lib/sparkfleet/run.lock
  take_over:
    description: The run (as a refusal names it) whose lock to take over - empty, only holders seen gone are taken over.
    type: str
    default: ""
  playbook:
    description: With C(released), the file name of the playbook releasing it (C(site.yml)), an empty one releases it whichever
      playbook the run was started with (a refused run gives its lock back).
    type: str
    default: ""
  holder:
    description: Set by the action plugin (this run's record); not for playbooks.
    type: dict
  run:
    description: Set by the action plugin (this run's ID, to release); not for playbooks.
    type: str
extends_documentation_fragment:
  - sparkfleet.vllm.attributes
attributes:
  check_mode:
    support: full
    details: Takes and releases nothing; returns the holder.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: The lock is bookkeeping of the run, not state of the cluster - it never reports a change.
author:
  - sparkfleet developers (@sparkfleet)
"""

EXAMPLES = r"""
- name: Take this run's lock on the head
  sparkfleet.vllm.run_lock:
    state: held
  delegate_to: spark1
  become: true

- name: Release it at the end of site.yml
  sparkfleet.vllm.run_lock:
    state: released
    playbook: site.yml
  delegate_to: spark1
  become: true
"""

RETURN = r"""
taken:
  description: Whether this run holds the lock now (C(held)).
  returned: state is held
  type: bool
previous:
  description: The holder record found before (empty when nobody held it).
  returned: always
  type: dict
  sample: {run: "ctl/3f2a:4242:123456", controller: ctl/3f2a, user: alice, pid: 4242, playbooks: [site.yml], since: "2026-12-03T14:10:00Z"}
alive:
  description: With C(read), whether the holder's ansible-playbook still runs (true), is gone (false), or cannot be
    told from this controller or there is no holder (null).
  returned: state is read
  type: bool
took_over:
  description: Whether this run took over the lock of a run that is gone (the message says whose).
  returned: state is held
  type: bool
released:
  description: Whether this task removed the record (C(released)).
  returned: state is released
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkfleet.vllm.plugins.module_utils import run_lock


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["held", "released", "read"], "default": "held"},
            "path": {"type": "path", "default": "/var/lib/sparkfleet/run.lock"},
            "take_over": {"type": "str", "default": ""},
            "playbook": {"type": "str", "default": ""},
            "holder": {"type": "dict"},
            "run": {"type": "str"},
        },
        supports_check_mode=True,
    )
    params = module.params
    path = params["path"]
    if params["state"] == "read" or module.check_mode:
        module.exit_json(changed=False, previous=run_lock.read(path) or {})
    if params["state"] == "released":
        if not params["run"]:
            module.fail_json(msg="run_lock state=released needs run (the action plugin sets it: use sparkfleet.vllm.run_lock in a playbook).")
        previous = run_lock.read(path) or {}
        module.exit_json(changed=False, released=run_lock.release(path, params["run"]), previous=previous)
    if not params["holder"] or not params["holder"].get("run"):
        module.fail_json(msg="run_lock state=held needs holder (the action plugin sets it: use sparkfleet.vllm.run_lock in a playbook).")
    taken, previous = run_lock.take(path, params["holder"], params["take_over"])
    module.exit_json(changed=False, taken=taken, previous=previous or {}, took_over=taken and bool(previous) and previous.get("run") != params["holder"]["run"])


if __name__ == "__main__":
    main()
