"""One run at a time: the lock record on the head and whether its holder still runs (module_utils/run_lock.py)."""

from __future__ import annotations

import json
import multiprocessing
import os
import pathlib
import subprocess

from ansible_collections.sparkfleet.vllm.plugins.module_utils import run_lock

CONTROLLER = "ctl/0123456789ab"


def _holder(run="ctl/0123456789ab:4242:99", **fields):
    return {"run": run, "controller": CONTROLLER, "user": "alice", "pid": 4242, "pid_start": "99", "playbooks": ["site.yml"],
            "since": "2026-12-03T14:10:00Z", **fields}  # fmt: skip


def test_the_first_run_takes_the_lock_and_takes_it_again_harmlessly(tmp_path):
    path = str(tmp_path / "sparkfleet" / "run.lock")
    assert run_lock.take(path, _holder()) == (True, None)
    assert json.loads(pathlib.Path(path).read_text()) == _holder()
    assert run_lock.take(path, _holder()) == (True, _holder())  # an imported playbook of the same run
    assert oct(os.stat(path).st_mode & 0o777) == "0o644"


def test_a_second_run_is_refused_and_gets_the_holder_and_the_record_stays(tmp_path):
    path = str(tmp_path / "run.lock")
    run_lock.take(path, _holder())
    second = _holder(run="ctl/0123456789ab:5151:7", pid=5151, playbooks=["lane.yml"])
    assert run_lock.take(path, second) == (False, _holder())
    assert run_lock.read(path) == _holder()
    assert run_lock.release(path, second["run"]) is False  # only the holder releases it
    assert run_lock.read(path) == _holder()


def test_a_take_over_replaces_only_the_run_it_names(tmp_path):
    path = str(tmp_path / "run.lock")
    run_lock.take(path, _holder())
    second = _holder(run="other:1:1", controller="other")
    assert run_lock.take(path, second, take_over="not-the-holder")[0] is False
    assert run_lock.take(path, second, take_over=_holder()["run"]) == (True, _holder())
    assert run_lock.read(path) == second


def test_the_holder_releases_and_the_next_run_takes_it(tmp_path):
    path = str(tmp_path / "run.lock")
    run_lock.take(path, _holder())
    assert run_lock.release(path, _holder()["run"]) is True
    assert run_lock.read(path) is None
    assert run_lock.release(path, _holder()["run"]) is False
    assert run_lock.take(path, _holder(run="next:1:1"))[0] is True


def test_an_unreadable_record_is_held_not_ignored(tmp_path):
    path = tmp_path / "run.lock"
    path.write_text("{half a rec")
    taken, found = run_lock.take(str(path), _holder())
    assert taken is False
    assert found["run"] == "unreadable"
    assert str(path) in found["playbooks"][0]


def _race(path, run, barrier, results):
    barrier.wait()
    results.put((run, run_lock.take(path, _holder(run=run))[0]))


def test_two_runs_taking_the_lock_at_the_same_moment_get_it_once(tmp_path):
    path = str(tmp_path / "run.lock")
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(6), context.Queue()
    workers = [context.Process(target=_race, args=(path, f"run{index}", barrier, results)) for index in range(6)]
    for worker in workers:
        worker.start()
    outcomes = dict(results.get(timeout=30) for _unused in workers)
    for worker in workers:
        worker.join(timeout=30)
    assert sorted(outcomes.values()) == [False] * 5 + [True]
    assert run_lock.read(path)["run"] == next(run for run, taken in outcomes.items() if taken)


def test_a_holder_is_alive_while_its_process_runs_with_the_same_start_time():
    me = {"controller": CONTROLLER, "pid": os.getpid(), "pid_start": run_lock.process_start(os.getpid())}
    assert me["pid_start"]
    assert run_lock.holder_alive(me, CONTROLLER) is True
    assert run_lock.holder_alive(dict(me, pid_start="1"), CONTROLLER) is False  # the pid reused by another process
    ended = subprocess.Popen(["true"])
    ended.wait()
    assert run_lock.holder_alive(dict(me, pid=ended.pid), CONTROLLER) is False
    assert run_lock.holder_alive(me, "another/controller") is None  # cannot tell from here


def test_a_controller_without_proc_cannot_tell_and_never_takes_a_holder_for_gone(tmp_path):
    """macOS has no /proc: every holder, this controller's included, is "cannot tell", so a second run from the same
    Mac is refused (named, with the take-over) instead of taking the lock of a run that still changes the cluster."""
    no_proc = str(tmp_path / "proc")
    me = run_lock.this_run(["site.yml"], proc=no_proc, controller=CONTROLLER)
    assert me["pid_start"] == "0"
    assert run_lock.holder_alive(me, CONTROLLER, proc=no_proc) is None
    here = {"controller": CONTROLLER, "pid": os.getpid(), "pid_start": run_lock.process_start(os.getpid())}
    assert run_lock.holder_alive(here, CONTROLLER, proc=no_proc) is None
    assert run_lock.holder_alive(dict(here, pid_start="0"), CONTROLLER) is None  # a record a controller without /proc wrote


def test_the_run_is_the_nearest_ansible_playbook_process_above(tmp_path):
    """A fake /proc: 200 (a shell) -> 300 (ansible-playbook) -> 400 (a worker: a fork, the same command line) -> 500
    (a module's python)."""
    playbook = [b"/usr/bin/python3", b"/venv/bin/ansible-playbook", b"site.yml"]
    for pid, parent, argv in ((200, 1, [b"/bin/bash"]), (300, 200, playbook), (400, 300, playbook), (500, 400, [b"/usr/bin/python3", b"-c", b"x"])):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(f"{pid} (python3 (x)) S {parent} " + " ".join(["0"] * 17) + f" {pid * 10} 0 0\n")
        (tmp_path / str(pid) / "cmdline").write_bytes(b"\0".join(argv) + b"\0")
    assert run_lock.playbook_process(500, str(tmp_path)) == 300
    assert run_lock.playbook_process(400, str(tmp_path)) == 300
    assert run_lock.playbook_process(200, str(tmp_path)) == 0
    assert run_lock.process_start(300, str(tmp_path)) == "3000"
    run = run_lock.this_run(["sparkfleet.vllm.site", "playbooks/lane.yml"], pid=500, proc=str(tmp_path), controller=CONTROLLER, now=0)
    assert run["run"] == f"{CONTROLLER}:300:3000"
    assert (run["pid"], run["playbooks"], run["since"]) == (300, ["site.yml", "lane.yml"], "1970-01-01T00:00:00Z")


def test_a_refusal_names_the_holder_and_the_way_out():
    gone_or_unknown = run_lock.refusal("spark1", _holder(), None)
    assert gone_or_unknown == (
        "spark1's cluster is being changed by another run: site.yml run by alice on ctl/0123456789ab (ansible-playbook pid 4242)"
        " since 2026-12-03T14:10:00Z. Nothing was changed by this run. If that run is gone (its controller stopped or lost),"
        " take its lock over: run again with -e cluster_run_lock_take_over=ctl/0123456789ab:4242:99."
    )
    assert run_lock.refusal("spark1", _holder(), True).endswith("Nothing was changed by this run. Wait for it to end, then run again.")
