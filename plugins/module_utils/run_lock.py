# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""One run at a time: the lock a run that changes a cluster takes on its engine's head.

The record names its holder: the controller, that controller's ansible-playbook process (its pid and the
kernel's start time of it, so that a reused pid is not mistaken for the holder), the user, the playbook and
since when. The head's side is file work (read, take, release) under an flock of a guard file beside the
record, so that two runs taking the lock at once cannot both get it, and a take-over replaces only the record
it read. The controller's side says whether a holder still runs: only the controller it ran on can tell; from
any other the answer is "unknown" and the run is refused, naming the holder and the way to take it over.
Pure Python, no Ansible imports.
"""

from __future__ import annotations

import contextlib
import fcntl
import getpass
import json
import os
import socket
import time

PLAYBOOK_PROGRAM = "ansible-playbook"


def process_start(pid, proc="/proc"):
    """The kernel's start time of a process (clock ticks since boot, /proc/PID/stat field 22), or None if it is gone."""
    try:
        with open(f"{proc}/{int(pid)}/stat", encoding="utf-8") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError, ValueError):
        return None
    return fields[19] if len(fields) > 19 else None  # fields[0] is field 3 (state)


def _parent(pid, proc):
    try:
        with open(f"{proc}/{int(pid)}/stat", encoding="utf-8") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _is_playbook_process(pid, proc):
    try:
        with open(f"{proc}/{int(pid)}/cmdline", "rb") as cmdline:
            argv = [part.decode(errors="replace") for part in cmdline.read().split(b"\0") if part]
    except OSError:
        return False
    return any(os.path.basename(part) == PLAYBOOK_PROGRAM for part in argv[:2])


def playbook_process(pid=None, proc="/proc"):
    """The pid of the ansible-playbook run this process belongs to, or 0: the nearest ansible-playbook process at or
    above it, then up through its parents while they are ansible-playbook too (a worker is a fork of the run's main
    process, with the same command line, and ends with its task)."""
    pid = pid or os.getpid()
    while pid > 1 and not _is_playbook_process(pid, proc):
        pid = _parent(pid, proc)
    if pid <= 1:
        return 0
    while _is_playbook_process(_parent(pid, proc), proc):
        pid = _parent(pid, proc)
    return pid


def controller_id(machine_id_path="/etc/machine-id"):
    """This controller, as a holder record names it: its host name, and its machine ID where it has one."""
    host = socket.gethostname()
    with contextlib.suppress(OSError), open(machine_id_path, encoding="utf-8") as machine_id:
        return f"{host}/{machine_id.read().strip()[:12]}"
    return host


def playbook_name(argument):
    """A playbook argument as ansible-playbook took it (a path, or a collection's FQCN) -> its file name."""
    text = str(argument)
    if "/" not in text and not text.endswith((".yml", ".yaml")) and text.count(".") >= 2:
        return text.rsplit(".", 1)[1] + ".yml"  # sparkfleet.vllm.site -> site.yml
    return os.path.basename(text)


def this_run(playbooks, pid=None, proc="/proc", controller=None, now=None):
    """The holder record of this controller's run of the given playbooks (ansible-playbook's positional arguments)."""
    main = playbook_process(pid, proc) or os.getppid()
    start = process_start(main, proc) or "0"
    controller = controller or controller_id()
    return {
        "run": f"{controller}:{main}:{start}",
        "controller": controller,
        "user": getpass.getuser(),
        "pid": main,
        "pid_start": start,
        "playbooks": [playbook_name(playbook) for playbook in playbooks or []],
        "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
    }


def holder_alive(holder, controller=None, proc="/proc"):
    """True while the holder's ansible-playbook still runs, False once it is gone, None where this controller cannot
    tell: the holder ran on another controller, or this one has no /proc to read start times from (macOS), where a
    holder of this controller must not read as gone."""
    if holder.get("controller") != (controller or controller_id()):
        return None
    if process_start(os.getpid(), proc) is None or holder.get("pid_start") in (None, "0"):
        return None
    return process_start(holder.get("pid", 0), proc) == holder.get("pid_start")


def describe(holder):
    """A holder, in a sentence: 'site.yml run by alice on ctl/0123 (ansible-playbook pid 4242) since 2026-...'."""
    playbooks = ", ".join(holder.get("playbooks") or ["a playbook"])
    return (
        f"{playbooks} run by {holder.get('user', '?')} on {holder.get('controller', '?')}"
        f" (ansible-playbook pid {holder.get('pid', '?')}) since {holder.get('since', '?')}"
    )


def refusal(head, holder, alive):
    """Why this run may not change the cluster, and the way out."""
    gone = f"If that run is gone (its controller stopped or lost), take its lock over: run again with -e cluster_run_lock_take_over={holder.get('run')}"
    if alive:
        gone = "Wait for it to end, then run again"
    return f"{head}'s cluster is being changed by another run: {describe(holder)}. Nothing was changed by this run. {gone}."


@contextlib.contextmanager
def _guarded(path):
    os.makedirs(os.path.dirname(path) or ".", mode=0o755, exist_ok=True)
    with open(f"{path}.guard", "a", encoding="utf-8") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(guard, fcntl.LOCK_UN)


def read(path):
    """The holder record at path, or None when nobody holds the lock (an unreadable record counts as held)."""
    try:
        with open(path, encoding="utf-8") as record:
            text = record.read()
    except FileNotFoundError:
        return None
    try:
        holder = json.loads(text)
    except ValueError:
        return {"run": "unreadable", "playbooks": [f"an unreadable record at {path}"]}
    return holder if isinstance(holder, dict) else {"run": "unreadable", "playbooks": [f"an unreadable record at {path}"]}


def take(path, holder, take_over=""):
    """Take the lock for holder's run -> (taken, the record found before). Taken when nobody held it, when this run
    already did, or when the record found is the run take_over names."""
    with _guarded(path):
        found = read(path)
        if found is not None and found.get("run") != holder["run"] and not (take_over and found.get("run") == take_over):
            return False, found
        if found is None or found.get("run") != holder["run"]:
            partial = f"{path}.{os.getpid()}"
            with open(partial, "w", encoding="utf-8") as record:
                json.dump(holder, record, sort_keys=True)
                record.write("\n")
            os.chmod(partial, 0o644)
            os.replace(partial, path)
        return True, found


def release(path, run):
    """Release the lock if run holds it -> whether a record was removed."""
    with _guarded(path):
        found = read(path)
        if found is None or found.get("run") != run:
            return False
        os.remove(path)
        return True
