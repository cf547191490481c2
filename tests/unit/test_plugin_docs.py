"""Every plugin's DOCUMENTATION, EXAMPLES and RETURN is YAML that ansible-doc can read.

A YAML slip in a docstring (a ": " in a plain scalar) breaks `ansible-doc` and nothing else: the module
still runs. Parsed here as ansible-doc parses it, one case per plugin and block."""

from __future__ import annotations

import ast
import pathlib

import pytest
import yaml

PLUGINS = pathlib.Path(__file__).resolve().parents[2] / "plugins"
BLOCKS = ("DOCUMENTATION", "EXAMPLES", "RETURN")


def _blocks():
    for path in sorted(PLUGINS.glob("*/*.py")):
        if path.parent.name == "module_utils" or path.name == "__init__.py":
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) in BLOCKS:
                yield pytest.param(node.value.value, id=f"{path.parent.name}/{path.stem}:{node.targets[0].id}")


def _descriptions(doc):
    """Every description in a parsed doc block, wherever it is nested (options, suboptions, return values)."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key in ("description", "short_description"):
                yield value
            else:
                yield from _descriptions(value)
    elif isinstance(doc, list):
        for item in doc:
            yield from _descriptions(item)


@pytest.mark.parametrize("text", list(_blocks()))
def test_plugin_doc_block_is_yaml_whose_descriptions_are_text(text):
    """ansible-doc formats each description line as text: a ": " inside one makes it a mapping, and then
    ansible-doc fails on the whole plugin (found on the serve_args filters)."""
    doc = yaml.safe_load(text)
    for description in _descriptions(doc):
        lines = description if isinstance(description, list) else [description]
        assert all(isinstance(line, str) for line in lines), lines


def test_every_module_has_all_three_blocks():
    for path in sorted((PLUGINS / "modules").glob("*.py")):
        names = {getattr(node.targets[0], "id", None) for node in ast.parse(path.read_text(encoding="utf-8")).body if isinstance(node, ast.Assign)}
        assert set(BLOCKS) <= names, path.name
