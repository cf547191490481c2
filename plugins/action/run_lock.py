# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Action plugin: take or release a cluster's run lock (the record is the run_lock module's, on the head).

The controller knows what the head cannot: which run this is (its ansible-playbook process and the playbooks it
was started with) and whether a holder that ran here still runs. The logic is module_utils/run_lock.py's.
"""

from __future__ import annotations

from ansible import context
from ansible.plugins.action import ActionBase

from ansible_collections.sparkfleet.vllm.plugins.module_utils import run_lock

MODULE = "sparkfleet.vllm.run_lock"


class ActionModule(ActionBase):
    """Take (held), release (released) or read the lock on the host the task runs on (the engine's head)."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("state", "path", "take_over", "playbook"))

    def _lock(self, task_vars, **args):
        module_args = {key: value for key, value in self._task.args.items() if key in ("state", "path", "take_over", "playbook")}
        module_args.update(args)
        return self._execute_module(module_name=MODULE, module_args=module_args, task_vars=task_vars)

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        state = self._task.args.get("state", "held")
        head = task_vars.get("inventory_hostname", "the head")
        if self._task.delegate_to:
            head = self._task.delegate_to
        if state == "read" or self._task.check_mode:
            reply = self._lock(task_vars, state="read")
            holder = reply.get("previous") or {}
            # Whether the holder still runs: True, False (gone), None (no holder, or another controller's).
            reply["alive"] = run_lock.holder_alive(holder) if holder else None
            reply["msg"] = run_lock.describe(holder) if holder else "free"
            if state != "read":
                reply["msg"] = "check mode: no lock taken (a --check run changes nothing)"
            return {**result, **reply}
        me = run_lock.this_run(context.CLIARGS.get("args") or [])
        if state == "released":
            playbook = self._task.args.get("playbook", "")
            if playbook and playbook not in me["playbooks"]:
                return {**result, "changed": False, "released": False, "msg": f"kept: the run of {', '.join(me['playbooks'])} releases it at its end"}
            return {**result, **self._lock(task_vars, state="released", run=me["run"])}

        reply = self._lock(task_vars, state="held", holder=me)
        if reply.get("failed") or reply.get("taken"):
            return self._said(result, reply)
        previous = reply.get("previous") or {}
        if run_lock.holder_alive(previous) is False:
            reply = self._lock(task_vars, state="held", holder=me, take_over=previous.get("run", ""))
            if reply.get("taken"):
                return self._said(result, reply)
            previous = reply.get("previous") or previous
        return {
            **result,
            **reply,
            "failed": True,
            "msg": run_lock.refusal(head, previous, run_lock.holder_alive(previous)),
        }

    @staticmethod
    def _said(result, reply):
        if reply.get("took_over"):
            reply["msg"] = f"took over the lock of a run that ended without releasing it (failed, killed or lost): {run_lock.describe(reply['previous'])}"
        return {**result, **reply}
