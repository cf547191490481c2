"""The repository's documents stay documents: a README for users, one-line changelog fragments, no work log."""

from __future__ import annotations

import pathlib
import re

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
FRAGMENTS = sorted((REPO / "changelogs/fragments").glob("*.yml"))
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# "component - change": the component is a role, module, playbook, file or a comma-separated list of them.
ENTRY = re.compile(r"^[\w.\-/*]+(, [\w.\-/*]+)* - \S")


@pytest.mark.parametrize("fragment", FRAGMENTS, ids=lambda path: path.name)
def test_a_changelog_fragment_is_one_line_naming_its_component(fragment):
    sections = yaml.safe_load(fragment.read_text())
    entries = [entry for section in sections.values() for entry in section]
    assert len(entries) == 1, f"{fragment.name}: {len(entries)} entries; one fragment, one line"
    (entry,) = entries
    assert "\n" not in entry.strip(), f"{fragment.name}: more than one line"
    assert len(entry) <= 160, f"{fragment.name}: {len(entry)} characters; keep it to one line"
    assert ENTRY.match(entry), f"{fragment.name}: {entry!r} does not read 'component - change'"


def test_the_readme_is_a_users_document_of_at_most_about_200_lines():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 210, f"README.md has {len(lines)} lines; measured figures go to docs/measurements.md"


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_no_document_is_a_work_log(document):
    text = document.read_text()
    assert not re.search(r"\b(session|sessions)\b", text, re.I), f"{document.name} speaks of working sessions"
    assert not re.search(r"\b(first|second|third|fourth|fifth|\w+teenth|twelfth|eleventh|tenth)\s+session", text, re.I)
    # History is git's: a commit hash is not cited as when something changed.
    assert not re.search(r"\(stop \d+|landing \(|\b(on|of|at) [0-9a-f]{7,12}\b", text), f"{document.name} cites a commit or a landing"
