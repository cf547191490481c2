"""The table of stage times and the closing pass/fail line of a CI run.

Usage: python3 .ci/stage_times.py STAMPED_LOG CI_STARTED_EPOCH MAKE_STARTED_EPOCH [CPU_SAMPLES]
Stages are found in `make test`'s own output: make's echo of each target's
first command (the side-by-side checks, pytest of tests/integration, molecule)
and molecule's "Executing" line of each step. A stage lasts until the next
one starts. lint, unit and sanity run side by side (make -j3 -O prints each
one's output whole when it ends): their own rows come from the
"ci-stage NAME start|end EPOCH" lines each prints, under the group's row.
What runs beside the default scenario's verify (the Makefile's BESIDE_VERIFY, the
rehearsal then integration; BESIDE_VERIFY_IDLE, the checks) prints each
line after its name ("[checks] ", "[rehearsal] "; verify's own lines begin
"[default] "). The default scenario's steps
are the main rows; each other name is a row of its own under the main row it
overlaps most, from its first line to its last, and a scenario's steps are rows
under it, each lasting until that scenario's next step or its last line.
The last line is the sum of every pytest summary line (unit, integration,
molecule's verify): "ci: N passed, N failed, N skipped".
CPU_SAMPLES (.ci/run writes it: "EPOCH" and /proc/stat's "cpu" line, every few
seconds) adds each stage's CPU seconds and how busy the machine's cores were:
a stage near 100% gains nothing from running beside another. Its "EPOCH disk
KIB" lines (the free disk) add the run's least free disk, and the stage it
fell in: what the run needed of the disk it started with.
"""

from __future__ import annotations

import re
import sys

ANSI = re.compile(r"\x1b\[[0-9;]*m")
CHECKS = "lint + unit + sanity, side by side"
MARKERS = (
    (CHECKS, re.compile(r"--output-sync=target lint unit sanity$")),
    ("integration", re.compile(r"^pytest -q tests/integration")),
    ("molecule (setup)", re.compile(r"^molecule destroy$")),
)
# A line of what runs beside verify: "[NAME] " first. The default scenario's lines are the main rows'.
LANE = re.compile(r"^\[([\w-]+)\] ")
MAIN_LANE = "default"
# The rows of what ran beside verify and is not a molecule scenario (the Makefile's targets).
SIDE_NAMES = {"checks": CHECKS, "integration": "integration"}
# A stage's own start and end, printed by the Makefile where stages overlap.
OWN_TIMES = re.compile(r"^ci-stage (\S+) (start|end) ([0-9.]+)$")
OWN_NAMES = {"lint": "lint", "unit": "unit", "sanity": "sanity (ansible-test)"}
# "INFO     default ➜ converge: Executing" (molecule 25); the verifier's own "verify: Executing Testinfra
# tests ..." line that follows is not a new step.
# Another scenario than default names its rows with its name ("molecule rehearsal converge").
MOLECULE_STEPS = ("dependency", "cleanup", "destroy", "syntax", "create", "prepare", "converge", "idempotence", "side_effect", "verify")
MOLECULE_STEP = re.compile(r"(?:(\S+) ➜ )?\b(" + "|".join(MOLECULE_STEPS) + r"): Executing\s*$")
PYTEST_SUMMARY = re.compile(r"^(?:\[[\w-]+\] )?[\s│]*(=+ )?\d+ (passed|failed|errors?|skipped)\b.* in [0-9.]+s")


def read(path: str) -> list[tuple[float, str]]:
    lines = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for raw in handle:
            stamp, _unused, text = raw.partition("\t")
            try:
                lines.append((float(stamp), ANSI.sub("", text.rstrip("\n"))))
            except ValueError:
                continue
    return lines


def stages(lines: list[tuple[float, str]], ci_started: float, make_started: float) -> list[tuple[str, float]]:
    return [(name, end - start) for name, start, end in stage_windows(lines, ci_started, make_started)]


def lanes(lines: list[tuple[float, str]]) -> dict[str, list[tuple[float, str]]]:
    """The lines of each lane, its name prefix taken off: the main one ("") holds every line of no other lane."""
    found: dict[str, list[tuple[float, str]]] = {"": []}
    for stamp, text in lines:
        prefix = LANE.match(text)
        lane = prefix.group(1) if prefix and prefix.group(1) != MAIN_LANE else ""
        found.setdefault(lane, []).append((stamp, text[prefix.end() :] if prefix else text))
    return found


def side_windows(lines: list[tuple[float, str]]) -> dict[str, list[tuple[str, float, float]]]:
    """(step, start, end) of each step of everything that ran beside the main rows, by its name: a scenario's
    molecule steps, or one step from its first line to its last for what is not a scenario."""
    sides = {}
    for lane, own in lanes(lines).items():
        if not lane or not own:
            continue
        starts = [(step.group(2), stamp) for stamp, text in own if (step := MOLECULE_STEP.search(text))]
        if not starts:
            starts = [(SIDE_NAMES.get(lane, lane), own[0][0])]
        ends = [start for _unused, start in starts[1:]] + [own[-1][0]]
        sides[lane] = [(name, start, max(start, end)) for (name, start), end in zip(starts, ends, strict=True)]
    return sides


def side_title(lane: str, steps: list[tuple[str, float, float]]) -> str:
    """A side row's name: "molecule NAME" for a scenario (its steps are rows under it), else its one step's."""
    return f"molecule {lane}" if steps[0][0] in MOLECULE_STEPS else steps[0][0]


def beside(rows: list[tuple[str, float, float]], steps: list[tuple[str, float, float]]) -> tuple[str, float, float]:
    """The main row that a side scenario's steps (side_windows) overlap most: the one it ran beside."""
    first, last = steps[0][1], steps[-1][2]
    return max(rows, key=lambda row: min(row[2], last) - max(row[1], first))


def stage_windows(lines: list[tuple[float, str]], ci_started: float, make_started: float) -> list[tuple[str, float, float]]:
    """(name, start, end) of each main stage, in order; a stage ends when the next one starts."""
    starts = [("ci setup (Docker engine, swap)", ci_started), ("make: venv, wheels, host check", make_started)]
    for stamp, text in lanes(lines)[""]:
        for name, pattern in MARKERS:
            if pattern.search(text):
                starts.append((name, stamp))
        step = MOLECULE_STEP.search(text)
        if step and "molecule" in (starts[-1][0] if starts else ""):
            scenario = step.group(1) if step.group(1) not in (None, "default") else ""
            name = "molecule " + (scenario + " " if scenario else "") + step.group(2)
            # A step is named once per run of it; a second destroy (the last step) is its own row.
            starts.append((name, stamp))
    end = lines[-1][0] if lines else make_started
    rows = []
    for index, (name, start) in enumerate(starts):
        finish = starts[index + 1][1] if index + 1 < len(starts) else end
        rows.append((name, start, max(start, finish)))
    return rows


def own_stages(lines: list[tuple[float, str]]) -> list[tuple[str, float]]:
    """(name, seconds) of each stage that printed its own start; one that never printed its end failed (a recipe
    line's error stops the recipe) and ran until the last line of its own output: make -O prints a target's output
    whole when the target ends, its start line first."""
    starts, rows = {}, []
    block = {}  # lane -> the stage whose output its lines are now
    printed = {}  # stage -> when the last line of its output was printed
    for stamp, text in lines:
        prefix = LANE.match(text)
        lane = prefix.group(1) if prefix else ""
        found = OWN_TIMES.match(text[prefix.end() if prefix else 0 :].strip())
        if not found:
            if block.get(lane) in starts:
                printed[block[lane]] = stamp
            continue
        name, what, epoch = found.group(1), found.group(2), float(found.group(3))
        if what == "start":
            starts[name], block[lane], printed[name] = epoch, name, stamp
        elif name in starts:
            rows.append((OWN_NAMES.get(name, name), epoch - starts.pop(name)))
            block.pop(lane, None)
    rows += [(OWN_NAMES.get(name, name) + " (failed)", max(0.0, printed[name] - start)) for name, start in starts.items()]
    return rows


def read_cpu(path: str) -> list[tuple[float, float, float]]:
    """(epoch, busy, all) jiffies of the machine, from lines "EPOCH cpu USER NICE SYSTEM IDLE IOWAIT IRQ SOFTIRQ STEAL ..."."""
    samples = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            fields = line.split()
            if len(fields) < 10 or fields[1] != "cpu":
                continue
            epoch, counts = float(fields[0]), [int(value) for value in fields[2:10]]
            idle = counts[3] + counts[4]
            samples.append((epoch, float(sum(counts) - idle), float(sum(counts))))
    return samples


def read_disk(path: str) -> list[tuple[float, int]]:
    """(epoch, free KiB) of the checkout's disk, from lines "EPOCH disk KIB"."""
    samples = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            fields = line.split()
            if len(fields) == 3 and fields[1] == "disk" and fields[2].isdigit():
                samples.append((float(fields[0]), int(fields[2])))
    return samples


def least_free_disk(samples: list[tuple[float, int]], rows: list[tuple[str, float, float]]) -> str | None:
    """The run's least free disk, what it used of the disk it started with, and the main stage it fell in."""
    if not samples:
        return None
    epoch, least = min(samples, key=lambda sample: sample[1])
    stage = next((name for name, start, end in rows if start <= epoch <= end), "after the last stage")
    return f"least free disk: {least / 1048576:.1f} GB, during {stage} ({(samples[0][1] - least) / 1048576:.1f} GB below the start)"


def cpu_use(samples: list[tuple[float, float, float]], start: float, end: float, hz: int = 100) -> tuple[float, float] | None:
    """(CPU seconds, busy share of every core) between the samples nearest to start and end; None without two."""
    if not samples:
        return None
    first = min(samples, key=lambda sample: abs(sample[0] - start))
    last = min(samples, key=lambda sample: abs(sample[0] - end))
    if last[2] <= first[2]:
        return None
    return (last[1] - first[1]) / hz, (last[1] - first[1]) / (last[2] - first[2])


def totals(lines: list[tuple[float, str]]) -> dict[str, int]:
    counts = {"passed": 0, "failed": 0, "skipped": 0, "error": 0}
    for _unused, text in lines:
        if not PYTEST_SUMMARY.search(text):
            continue
        for count, word in re.findall(r"(\d+) (passed|failed|skipped|errors?)\b", text):
            counts["error" if word.startswith("error") else word] += int(count)
    return counts


def main() -> int:
    lines = read(sys.argv[1])
    ci_started, make_started = float(sys.argv[2]), float(sys.argv[3])
    samples = read_cpu(sys.argv[4]) if len(sys.argv) > 4 else []
    # molecule's steps that did nothing (dependency disabled, no cleanup or prepare playbook) are no rows.
    rows = [row for row in stage_windows(lines, ci_started, make_started) if not (row[0].split()[-1] in MOLECULE_STEPS and row[2] - row[1] < 0.5)]
    own = own_stages(lines)
    sides = side_windows(lines)
    titles = {lane: side_title(lane, steps) for lane, steps in sides.items()}
    names = [row[0] for row in rows] + [f"beside it: {title}" for title in titles.values()]
    names += ["    " + name for name, _unused in own] + [f"    {step}" for steps in sides.values() for step, *_unused in steps]
    width = max(len(name) for name in names)
    # The checks' own rows go under the checks' row: a main row, or one beside verify.
    checks_beside = any(title == CHECKS for title in titles.values())

    def own_rows():
        for own_name, own_seconds in own:
            print("  " + ("    " + own_name).ljust(width) + f"   {own_seconds:7.0f}")

    print("ci: stage times" + (" (CPU s: the machine's, all cores; busy: share of its cores in use)" if samples else ""))
    print("  " + "stage".ljust(width) + "   seconds" + ("     CPU s   busy" if samples else ""))
    for name, start, end in rows:
        use = cpu_use(samples, start, end)
        print("  " + name.ljust(width) + f"   {end - start:7.0f}" + (f"   {use[0]:7.0f}   {use[1]:4.0%}" if use else ""))
        if name == CHECKS and not checks_beside:
            own_rows()
        # What ran beside this stage (most of its time): its wall time, and a scenario's steps.
        for lane, steps in sides.items():
            if beside(rows, steps) != (name, start, end):
                continue
            print("  " + f"beside it: {titles[lane]}".ljust(width) + f"   {steps[-1][2] - steps[0][1]:7.0f}")
            if titles[lane] == CHECKS:
                own_rows()
            elif titles[lane].startswith("molecule "):
                for step, step_start, step_end in steps:
                    print("  " + f"    {step}".ljust(width) + f"   {step_end - step_start:7.0f}")
    total = (lines[-1][0] if lines else make_started) - ci_started
    use = cpu_use(samples, ci_started, ci_started + total)
    print("  " + "total".ljust(width) + f"   {total:7.0f}" + (f"   {use[0]:7.0f}   {use[1]:4.0%}" if use else "") + f"  ({total / 60:.1f} min)")
    disk = least_free_disk(read_disk(sys.argv[4]), rows) if len(sys.argv) > 4 else None
    if disk:
        print(f"ci: {disk}")
    counts = totals(lines)
    print(f"ci: {counts['passed']} passed, {counts['failed'] + counts['error']} failed, {counts['skipped']} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
