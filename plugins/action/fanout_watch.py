# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Action plugin: show a running fan-out's progress on the controller, as it happens."""

from __future__ import annotations

import json
import shlex
import time

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.sparkfleet.vllm.plugins.module_utils import fanout

display = Display()


class ActionModule(ActionBase):
    """Read the head's status file every few seconds and print one progress line.

    A module's output only reaches the controller when it ends; a transfer of
    hundreds of GiB needs to say how far it got while it runs.
    """

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("status_path", "chain", "timeout_s", "interval_s", "quiet_s"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        path = args.get("status_path")
        if not path:
            raise AnsibleActionFail("fanout_watch needs status_path")
        chain = list(args.get("chain") or [])
        timeout_s = float(args.get("timeout_s", 3600))
        interval_s = float(args.get("interval_s", 5))
        quiet_s = float(args.get("quiet_s", 5))  # short transfers print nothing
        started = time.monotonic()
        status: dict = {}
        last_line = ""
        while time.monotonic() - started < timeout_s:
            reply = self._low_level_execute_command(f"cat {shlex.quote(path)} 2>/dev/null", sudoable=True)
            try:
                status = json.loads(reply.get("stdout") or "{}")
            except ValueError:
                status = {}  # caught between writes: read again
            state = status.get("state")
            if state in ("done", "failed"):
                break
            if state in ("running", "finishing") and time.monotonic() - started >= quiet_s:
                line = fanout.describe_progress(status, chain)
                if line != last_line:  # said once while the sinks finish
                    display.display(f"  {line}")
                last_line = line
            time.sleep(interval_s)
        else:
            result.update(failed=True, msg=f"no end of the fan-out after {timeout_s:.0f} s (last status: {status})")
            return result
        result.update(changed=False, status=status, progress=fanout.describe_progress(status, chain))
        if status.get("state") == "failed":
            result.update(failed=True, msg="fan-out {} failed: {}".format(" -> ".join(chain), status.get("error")))
        return result
