""".ci/stage_times.py: the stage table of a CI run, read from `make test`'s stamped output."""

import importlib.util
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).parents[2]
_spec = importlib.util.spec_from_file_location("stage_times", ROOT / ".ci/stage_times.py")
stage_times = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stage_times)

# make -j3 -O prints each side-by-side target's output whole when it ends: unit (started at 101) is printed
# at 170, lint (started at 100) at 175, sanity at 210; each says its own start and end.
LOG = [
    (100.0, "make --no-print-directory -j3 --output-sync=target lint unit sanity"),
    (170.0, "ci-stage unit start 101.0"),
    (170.0, "pytest -q tests/unit"),
    (170.0, "516 passed in 68.00s (0:01:08)"),
    (170.0, "ci-stage unit end 169.5"),
    (175.0, "ci-stage lint start 100.5"),
    (175.0, "ruff check plugins tests images molecule benchmarks"),
    (175.0, "ci-stage lint end 174.0"),
    (210.0, "ci-stage sanity start 100.8"),
    (210.0, "ci-stage sanity end 209.8"),
    (211.0, "pytest -q tests/integration"),
    (270.0, "11 passed in 58.10s"),
    (271.0, "molecule destroy"),
    (272.0, "INFO     default ➜ create: Executing"),
    (300.0, "[default] INFO     default ➜ verify: Executing"),
    (350.0, "[default]   │ 90 passed, 1 failed in 49.00s"),
]


def test_the_side_by_side_checks_are_one_row_of_wall_time_and_each_keeps_its_own():
    rows = dict(stage_times.stages(LOG, 90.0, 95.0))
    assert rows[stage_times.CHECKS] == 111.0  # 100 -> 211, when integration starts
    assert rows["integration"] == 60.0
    assert rows["molecule create"] == 28.0
    # Not "lint" at 175 nor "unit" at 170 as stages of their own: their printing is not their running.
    assert "lint" not in rows
    assert "unit" not in rows
    own = dict(stage_times.own_stages(LOG))
    assert own == pytest.approx({"unit": 68.5, "lint": 73.5, "sanity (ansible-test)": 109.0})


def test_a_check_that_failed_runs_until_the_last_line_of_its_own_output():
    own = dict(
        stage_times.own_stages(
            [
                (175.0, "[checks] ci-stage lint start 100.0"),
                (175.0, "[checks] would reformat: molecule/default/tests/new.py"),
                (175.5, "[checks] make[1]: *** [Makefile:87: lint] Error 1"),
                (300.0, "[checks] ci-stage unit start 100.2"),
                (300.0, "[checks] 1 failed, 9 passed in 199.00s"),
                (900.0, "[default]   │ 90 passed in 800.00s"),
            ]
        )
    )
    # Not until the run's last line (900): lint's output was printed when it ended, unit's when it did.
    assert own == {"lint (failed)": 75.5, "unit (failed)": 199.8}


def test_every_pytest_summary_counts_once():
    assert stage_times.totals(LOG) == {"passed": 617, "failed": 1, "skipped": 0, "error": 0}


def test_the_rehearsal_beside_verify_has_rows_of_its_own_and_cuts_no_main_row():
    # verify and the rehearsal print at once, each line marked with its scenario; then the default's destroy.
    log = [
        *LOG[:-2],
        (300.0, "[default] INFO     default ➜ verify: Executing"),
        (301.0, "[rehearsal] INFO     rehearsal ➜ destroy: Executing"),
        (305.0, "[rehearsal] INFO     rehearsal ➜ create: Executing"),
        (320.0, "[default]   │ PASSED tests/test_default.py::test_a"),
        (333.0, "[rehearsal] INFO     rehearsal ➜ converge: Executing"),
        (453.0, "[rehearsal] INFO     rehearsal ➜ verify: Executing"),
        (510.0, "[rehearsal]   │ 9 passed in 58.00s"),
        (511.0, "[rehearsal] INFO     rehearsal ➜ destroy: Executing"),
        (540.0, "[rehearsal] INFO     Molecule executed 1 scenario (1 successful)"),
        (600.0, "[default]   │ 90 passed, 1 failed in 300.00s"),
        (601.0, "INFO     default ➜ destroy: Executing"),
        (630.0, "INFO     Pruning extra files from scenario ephemeral directory"),
    ]
    rows = dict(stage_times.stages(log, 90.0, 95.0))
    assert rows["molecule verify"] == 301.0  # to the default's destroy, not to the rehearsal's first step
    assert rows["molecule destroy"] == 29.0
    assert not [name for name in rows if "rehearsal" in name]
    sides = stage_times.side_windows(log)
    assert [(step, end - start) for step, start, end in sides["rehearsal"]] == [
        ("destroy", 4.0), ("create", 28.0), ("converge", 120.0), ("verify", 58.0), ("destroy", 29.0),
    ]  # fmt: skip
    assert stage_times.totals(log) == {"passed": 617 + 9, "failed": 1, "skipped": 0, "error": 0}


def test_the_table_prints_the_scenario_beside_verify_under_it(tmp_path, capsys, monkeypatch):
    log = tmp_path / "stamped.log"
    # The rehearsal's first line came a moment before verify's (both start at once): it still ran beside verify.
    lines = [*LOG[:-2], (299.9, "[rehearsal] INFO     rehearsal ➜ create: Executing"), *LOG[-2:]]
    lines += [(340.0, "[rehearsal] done"), (360.0, "molecule destroy; exit 0")]
    log.write_text("".join(f"{stamp:.3f}\t{text}\n" for stamp, text in lines))
    monkeypatch.setattr("sys.argv", ["stage_times.py", str(log), "90", "95"])
    stage_times.main()
    table = capsys.readouterr().out.splitlines()
    at = next(index for index, line in enumerate(table) if line.split()[:2] == ["molecule", "verify"])
    assert table[at + 1].split() == ["beside", "it:", "molecule", "rehearsal", "40"]
    assert table[at + 2].split() == ["create", "40"]


def test_each_stage_gets_the_machines_cpu_seconds_and_busy_share_from_the_samples(tmp_path):
    # Two cores at USER_HZ 100: 200 jiffies a second in all. 100-110 s: both cores busy; 110-130 s: one of two.
    samples = tmp_path / "cpu.log"
    samples.write_text(
        "100.0 cpu 1000 0 0 5000 0 0 0 0 0 0\n"
        "110.0 cpu 2500 0 500 5000 0 0 0 0 0 0\n"
        "120.0 cpu 3000 0 1000 6000 0 0 0 0 0 0\n"
        "not a sample\n"
        "130.0 cpu 3500 0 1500 6900 100 0 0 0 0 0\n"
    )
    read = stage_times.read_cpu(str(samples))
    assert len(read) == 4
    assert stage_times.cpu_use(read, 100.0, 110.0) == pytest.approx((20.0, 1.0))
    assert stage_times.cpu_use(read, 110.2, 129.9) == pytest.approx((20.0, 0.5))  # the nearest samples: 110 and 130
    assert stage_times.cpu_use(read, 130.0, 130.0) is None
    assert stage_times.cpu_use([], 100.0, 110.0) is None


def test_the_table_has_cpu_columns_only_when_given_samples(tmp_path, capsys, monkeypatch):
    log = tmp_path / "make-test.log"
    log.write_text("".join(f"{stamp}\t{text}\n" for stamp, text in LOG))
    samples = tmp_path / "cpu.log"
    samples.write_text("".join(f"{90 + 10 * index}.0 cpu {2000 * index} 0 0 {100 * index} 0 0 0 0 0 0\n" for index in range(28)))
    monkeypatch.setattr("sys.argv", ["stage_times.py", str(log), "90", "95", str(samples)])
    assert stage_times.main() == 0
    table = capsys.readouterr().out
    assert "CPU s   busy" in table
    assert re.search(r"^  integration\s+60\s+120\s+95%$", table, re.M), table
    monkeypatch.setattr("sys.argv", ["stage_times.py", str(log), "90", "95"])
    stage_times.main()
    assert "busy" not in capsys.readouterr().out


# make test: beside verify, one after the other, the rehearsal, integration and the checks, each line after its name.
BESIDE_VERIFY_LOG = [
    (90.5, "bash molecule/resources/host-check.sh"),
    (100.0, "molecule destroy"),
    (110.0, "INFO     default ➜ create: Executing"),
    (140.0, "INFO     default ➜ converge: Executing"),
    (400.0, "[default] INFO     default ➜ verify: Executing"),
    (400.5, "[rehearsal] bash molecule/resources/host-check.sh"),
    (402.0, "[rehearsal] INFO     rehearsal ➜ create: Executing"),
    (450.0, "[rehearsal] INFO     rehearsal ➜ converge: Executing"),
    (700.0, "[rehearsal] INFO     rehearsal ➜ verify: Executing"),
    (800.0, "[rehearsal]   │ 39 passed in 99.00s"),
    (801.0, "[rehearsal] INFO     rehearsal ➜ destroy: Executing"),
    (830.0, "[rehearsal] INFO     Molecule executed 1 scenario (1 successful)"),
    (831.0, "[integration] pytest -q tests/integration"),
    (930.0, "[integration] 11 passed in 98.00s"),
    (931.0, "[checks] make --no-print-directory -j3 --output-sync=target lint unit sanity"),
    (1000.0, "[checks] ci-stage unit start 932.0"),
    (1000.0, "[checks] 516 passed in 67.00s (0:01:07)"),
    (1000.0, "[checks] ci-stage unit end 999.5"),
    (1010.0, "[checks] ci-stage lint start 931.5"),
    (1010.0, "[checks] ci-stage lint end 1009.0"),
    (1100.0, "[checks] ci-stage sanity start 931.8"),
    (1100.0, "[checks] ci-stage sanity end 1099.8"),
    (1500.0, "[default]   │ 118 passed in 1100.00s"),
    (1501.0, "INFO     default ➜ destroy: Executing"),
    (1530.0, "INFO     Pruning extra files from scenario ephemeral directory"),
]


def test_what_runs_beside_verify_gets_rows_of_its_own_under_verify_and_the_checks_keep_their_own():
    rows = dict(stage_times.stages(BESIDE_VERIFY_LOG, 80.0, 90.0))
    assert list(rows) == [
        "ci setup (Docker engine, swap)", "make: venv, wheels, host check", "molecule (setup)", "molecule create",
        "molecule converge", "molecule verify", "molecule destroy",
    ]  # fmt: skip
    assert rows["molecule verify"] == 1101.0
    sides = stage_times.side_windows(BESIDE_VERIFY_LOG)
    assert list(sides) == ["rehearsal", "integration", "checks"]
    assert [(step, end - start) for step, start, end in sides["integration"]] == [("integration", 99.0)]
    assert [(step, end - start) for step, start, end in sides["checks"]] == [(stage_times.CHECKS, 169.0)]
    assert [stage_times.side_title(lane, steps) for lane, steps in sides.items()] == ["molecule rehearsal", "integration", stage_times.CHECKS]
    assert dict(stage_times.own_stages(BESIDE_VERIFY_LOG)) == pytest.approx({"unit": 67.5, "lint": 77.5, "sanity (ansible-test)": 168.0})
    assert stage_times.totals(BESIDE_VERIFY_LOG) == {"passed": 39 + 11 + 516 + 118, "failed": 0, "skipped": 0, "error": 0}


def test_the_table_prints_each_thing_beside_verify_under_it_in_the_order_it_ran(tmp_path, capsys, monkeypatch):
    log = tmp_path / "stamped.log"
    log.write_text("".join(f"{stamp:.3f}\t{text}\n" for stamp, text in BESIDE_VERIFY_LOG))
    monkeypatch.setattr("sys.argv", ["stage_times.py", str(log), "80", "90"])
    stage_times.main()
    table = [line.split() for line in capsys.readouterr().out.splitlines()]
    at = table.index(["molecule", "verify", "1101"])
    assert table[at + 1 : at + 13] == [
        ["beside", "it:", "molecule", "rehearsal", "428"],
        ["create", "48"], ["converge", "250"], ["verify", "101"], ["destroy", "29"],
        ["beside", "it:", "integration", "99"],
        ["beside", "it:", "lint", "+", "unit", "+", "sanity,", "side", "by", "side", "169"],
        ["unit", "68"], ["lint", "78"], ["sanity", "(ansible-test)", "168"],
        ["molecule", "destroy", "29"],
        ["total", "1450", "(24.2", "min)"],
    ]  # fmt: skip


def test_molecule_steps_that_did_nothing_are_no_rows(tmp_path, capsys, monkeypatch):
    lines = [
        *BESIDE_VERIFY_LOG[:2],
        (100.2, "INFO     default ➜ dependency: Executing"),
        (100.3, "INFO     default ➜ cleanup: Executing"),
        (100.4, "INFO     default ➜ destroy: Executing"),
        *BESIDE_VERIFY_LOG[2:4],
        (399.8, "INFO     default ➜ prepare: Executing"),
        *BESIDE_VERIFY_LOG[4:],
    ]
    log = tmp_path / "stamped.log"
    log.write_text("".join(f"{stamp:.3f}\t{text}\n" for stamp, text in lines))
    monkeypatch.setattr("sys.argv", ["stage_times.py", str(log), "80", "90"])
    stage_times.main()
    table = capsys.readouterr().out
    assert "molecule dependency" not in table
    assert "molecule cleanup" not in table
    assert "molecule prepare" not in table
    assert re.search(r"^  molecule destroy\s+10$", table, re.M), table
    assert re.search(r"^  molecule converge\s+260$", table, re.M), table  # 140 -> 400, its prepare (0.2 s) no row


def test_the_least_free_disk_names_its_stage_and_how_far_below_the_start_it_fell(tmp_path, capsys, monkeypatch):
    log = tmp_path / "make-test.log"
    log.write_text("".join(f"{stamp}\t{text}\n" for stamp, text in LOG))
    samples = tmp_path / "cpu.log"
    gib = 1048576
    samples.write_text(
        f"90.0 cpu 0 0 0 0 0 0 0 0 0 0\n90.0 disk {40 * gib}\n"
        f"240.0 disk {22 * gib}\n300.0 disk {31 * gib}\n"
        "300.0 disk not-a-number\n"
        "370.0 cpu 28000 0 0 2800 0 0 0 0 0 0\n"
    )
    assert stage_times.read_disk(str(samples)) == [(90.0, 40 * gib), (240.0, 22 * gib), (300.0, 31 * gib)]
    monkeypatch.setattr("sys.argv", ["stage_times.py", str(log), "90", "95", str(samples)])
    assert stage_times.main() == 0
    table = capsys.readouterr().out
    assert "ci: least free disk: 22.0 GB, during integration (18.0 GB below the start)" in table, table
    assert stage_times.least_free_disk([], []) is None
