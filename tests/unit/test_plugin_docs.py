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


@pytest.mark.parametrize("text", list(_blocks()))
def test_plugin_doc_block_is_yaml(text):
    yaml.safe_load(text)


def test_every_module_has_all_three_blocks():
    for path in sorted((PLUGINS / "modules").glob("*.py")):
        names = {getattr(node.targets[0], "id", None) for node in ast.parse(path.read_text(encoding="utf-8")).body if isinstance(node, ast.Assign)}
        assert set(BLOCKS) <= names, path.name
