# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""The recipe's recovery rule as data: N failed probes in a row, then one ordered relaunch, capped per hour.

The state (failures in a row, times of recent relaunches) lives in a small JSON
file on the head; every event goes to a JSON-lines log beside it. A healthy
probe on a healthy engine writes nothing, so a watch that finds nothing wrong
changes nothing.
"""

from __future__ import annotations

import json
import os
import tempfile

HOUR_S = 3600
EMPTY_STATE = {"failures": 0, "relaunches": []}


class WatchError(ValueError):
    """A bad watch setting or an unreadable state file."""


def checked_policy(failures_before_relaunch, max_relaunches_per_hour):
    try:
        failures, cap = int(str(failures_before_relaunch)), int(str(max_relaunches_per_hour))
    except ValueError:
        raise WatchError(
            f"watch_failures_before_relaunch {failures_before_relaunch!r} and watch_max_relaunches_per_hour {max_relaunches_per_hour!r} must be whole numbers."
        ) from None
    if failures < 1:
        raise WatchError(f"watch_failures_before_relaunch {failures} must be 1 or more (the recipe waits for 3 failed probes).")
    if cap < 0:
        raise WatchError(f"watch_max_relaunches_per_hour {cap} must be 0 (never relaunch) or more.")
    return failures, cap


def load_state(path):
    if not os.path.exists(path):
        return dict(EMPTY_STATE, relaunches=[])
    try:
        with open(path) as handle:
            state = json.load(handle)
        return {"failures": int(state["failures"]), "relaunches": [float(t) for t in state["relaunches"]]}
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise WatchError(f"{path} is not a watch state file ({error}): remove it; the count starts again.") from None


def save_state(path, state):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".watch-")
    with os.fdopen(handle, "w") as out:
        json.dump(state, out, sort_keys=True)
    os.replace(temporary, path)


def judge(state, healthy, now, failures_before_relaunch, max_relaunches_per_hour):
    """One probe's verdict -> (new state, decision). Decisions:

    healthy    the engine answers (a failure streak, if any, ends here: 'recovered' when it was one);
    failing    not healthy, fewer than N failures in a row so far;
    relaunch   the N-th failure in a row and the hourly cap allows it (the relaunch is counted now);
    capped     the N-th (or later) failure, but the cap of relaunches in the last hour is reached.
    """
    recent = [t for t in state["relaunches"] if now - t < HOUR_S]
    if healthy:
        decision = "recovered" if state["failures"] else "healthy"
        return {"failures": 0, "relaunches": recent}, decision
    failures = state["failures"] + 1
    if failures < failures_before_relaunch:
        return {"failures": failures, "relaunches": recent}, "failing"
    if len(recent) >= max_relaunches_per_hour:
        return {"failures": failures, "relaunches": recent}, "capped"
    # Counted before it runs: a relaunch that itself fails still uses up the cap.
    return {"failures": 0, "relaunches": [*recent, now]}, "relaunch"


def append_event(path, event):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as log:
        log.write(json.dumps(event, sort_keys=True) + "\n")
