"""Every Dockerfile of ours fails its build when a step of a RUN chain fails.

`a && b && c || true` ignores a failure of a, b or c, not only of c: the build goes on without what the chain
was for and breaks later, somewhere that does not name the cause. A command whose own status may be ignored is
grouped, `a && { c || true; }`.
"""

from __future__ import annotations

import pathlib
import re

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
DOCKERFILES = sorted(path for root in ("images", "molecule/resources/images") for path in (REPO / root).rglob("Dockerfile"))


def _run_instructions(text):
    """(line number, shell text) of each RUN, continuation lines joined, comments dropped."""
    runs, current, start = [], None, 0
    for number, line in enumerate(text.splitlines(), 1):
        if current is None:
            if not re.match(r"\s*RUN\s", line, re.I):
                continue
            current, start, line = [], number, re.sub(r"^\s*RUN\s+", "", line, flags=re.I)
        elif line.lstrip().startswith("#"):
            continue
        current.append(line.rstrip().removesuffix("\\"))
        if not line.rstrip().endswith("\\"):
            runs.append((start, " ".join(current)))
            current = None
    return runs


def _top_level(shell):
    """The shell text outside quotes and outside { ...; } and ( ... ) groups."""
    shell = re.sub(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"", "''", shell)
    while True:
        grouped = re.sub(r"\{[^{}()]*\}|\([^{}()]*\)", "GROUP", shell)
        if grouped == shell:
            return shell
        shell = grouped


def _swallowing_chains(text):
    return [number for number, shell in _run_instructions(text) if re.search(r"&&.*\|\|", _top_level(shell))]


def test_the_repository_has_dockerfiles_to_check():
    names = {path.relative_to(REPO).as_posix() for path in DOCKERFILES}
    assert {"images/engine-cpu/Dockerfile", "molecule/resources/images/node/Dockerfile"} <= names


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda path: path.relative_to(REPO).as_posix())
def test_no_run_chain_ignores_a_failed_step(path):
    assert _swallowing_chains(path.read_text()) == [], f"{path.relative_to(REPO)}: group the command whose status is ignored"


def test_the_check_finds_a_chain_whose_status_a_trailing_or_true_replaces():
    swallowed = "FROM x\nRUN pip install a \\\n # why\n && python -m compileall /opt >/dev/null || true\n"
    grouped = "FROM x\nRUN pip install a \\\n && { python -m compileall /opt >/dev/null || true; }\n"
    alone = "FROM x\nRUN rm -f /tmp/x || true\nRUN echo 'a && b || c'\n"
    assert _swallowing_chains(swallowed) == [2]
    assert _swallowing_chains(grouped) == []
    assert _swallowing_chains(alone) == []
