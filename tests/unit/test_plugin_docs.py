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
    # Filters: one YAML file per filter beside the Python file that holds several (ansible-doc reads those).
    for path in sorted((PLUGINS / "filter").glob("*.yml")):
        for block, value in yaml.safe_load(path.read_text(encoding="utf-8")).items():
            yield pytest.param(value if isinstance(value, str) else yaml.safe_dump(value), id=f"filter/{path.stem}.yml:{block}")


def _filter_names():
    """Every filter the collection's filter plugins provide, as Ansible loads them."""
    import importlib

    names = set()
    for path in sorted((PLUGINS / "filter").glob("*.py")):
        module = importlib.import_module(f"ansible_collections.sparkfleet.vllm.plugins.filter.{path.stem}")
        names.update(module.FilterModule().filters())
    return names


def test_every_filter_has_its_own_documentation_and_no_python_file_hides_it():
    """A filter .py with DOCUMENTATION would be shown for every filter it holds: the docs are per filter, in YAML."""
    documented = {path.stem for path in (PLUGINS / "filter").glob("*.yml")}
    assert _filter_names() == documented
    for path in (PLUGINS / "filter").glob("*.py"):
        assigned = {getattr(node.targets[0], "id", None) for node in ast.parse(path.read_text(encoding="utf-8")).body if isinstance(node, ast.Assign)}
        assert not assigned & set(BLOCKS), path.name
    for name in documented:
        doc = yaml.safe_load((PLUGINS / "filter" / f"{name}.yml").read_text(encoding="utf-8"))
        assert set(doc) == set(BLOCKS), name
        assert doc["DOCUMENTATION"]["name"] == name
        assert "_input" in doc["DOCUMENTATION"]["options"], name


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


@pytest.mark.parametrize("plugin_type", ["module", "filter", "inventory", "callback"])
def test_ansible_doc_shows_every_plugin(plugin_type):
    """The real ansible-doc, as a user runs it, for every plugin of the type (one process per type)."""
    import json
    import os
    import subprocess
    import sys

    folder = {"module": "modules", "filter": "filter", "inventory": "inventory", "callback": "callback"}[plugin_type]
    suffix = "yml" if plugin_type == "filter" else "py"
    names = sorted(path.stem for path in (PLUGINS / folder).glob(f"*.{suffix}") if path.stem != "__init__")
    repo = PLUGINS.parent
    result = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ansible-doc"), "-t", plugin_type, "--json", *[f"sparkfleet.vllm.{name}" for name in names]],
        cwd=repo, env=dict(os.environ, ANSIBLE_CONFIG=str(repo / "ansible.cfg")), capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    shown = json.loads(result.stdout)
    assert sorted(shown) == [f"sparkfleet.vllm.{name}" for name in names]
    for name, entry in shown.items():
        assert entry["doc"]["short_description"], name
        assert entry["doc"].get("description"), name
        if plugin_type == "module":  # through the sparkfleet.vllm.attributes fragment, each with its support
            attributes = entry["doc"].get("attributes") or {}
            assert {key: attributes.get(key, {}).get("support") in ("full", "partial", "none", "N/A") for key in ("check_mode", "diff_mode", "idempotent")} == {
                "check_mode": True,
                "diff_mode": True,
                "idempotent": True,
            }, name
