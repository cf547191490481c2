"""Roles use each other through documented entry points only (docs/architecture.md, "Where a new thing goes").

Every include_role / import_role in a role's tasks or a playbook that names tasks_from must name an entry point
of that role's meta/argument_specs.yml: ansible-core then validates the options it is given, and
`ansible-doc -t role sparkfleet.vllm.ROLE` documents it. A reach-in to an undocumented task file fails here.
"""

from __future__ import annotations

import pathlib
import re

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
ROLES = sorted(path.name for path in (REPO / "roles").iterdir() if (path / "tasks/main.yml").is_file())


def _entry_points(role):
    return set(yaml.safe_load((REPO / "roles" / role / "meta/argument_specs.yml").read_text())["argument_specs"])


def _role_includes(node):
    """(role, tasks_from) of every include_role / import_role below a parsed task list or playbook."""
    if isinstance(node, list):
        for item in node:
            yield from _role_includes(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key.split(".")[-1] in ("include_role", "import_role") and isinstance(value, dict):
                yield value["name"].split(".")[-1], str(value.get("tasks_from", "main")).removesuffix(".yml")
            else:
                yield from _role_includes(value)


def _task_files():
    yield from sorted((REPO / "roles").glob("*/tasks/*.yml"))
    yield from sorted((REPO / "playbooks").glob("*.yml"))
    yield REPO / "site.yml"


CALLS = sorted({(str(path.relative_to(REPO)), role, entry) for path in _task_files() for role, entry in _role_includes(yaml.safe_load(path.read_text()))})


def test_the_roles_call_each_other_and_the_playbooks_call_them():
    called = {(role, entry) for _unused, role, entry in CALLS}
    # Counted so that a parser that finds nothing cannot pass the test below.
    assert {("engine", "render"), ("preflight", "fit"), ("host", "drop_caches"), ("nccl", "image")} <= called
    assert len(CALLS) >= 15


@pytest.mark.parametrize(("caller", "role", "entry"), CALLS, ids=[f"{caller}->{role}:{entry}" for caller, role, entry in CALLS])
def test_every_role_entry_point_used_is_documented_in_its_argument_specs(caller, role, entry):
    assert role in ROLES, f"{caller} includes an unknown role {role}"
    assert entry in _entry_points(role), (
        f"{caller} calls roles/{role}/tasks/{entry}.yml, which is not an entry point of roles/{role}/meta/argument_specs.yml: "
        f"add it there (short_description, options), or call the role's main entry point"
    )


@pytest.mark.parametrize("role", ROLES)
def test_every_entry_point_has_a_task_file(role):
    for entry in _entry_points(role):
        assert (REPO / "roles" / role / "tasks" / f"{entry}.yml").is_file(), f"roles/{role}: entry point {entry} has no tasks/{entry}.yml"


# The role graph: an edge from the role whose tasks include another role to that role.
EDGES = {(caller.split("/")[1], role) for caller, role, _unused in CALLS if caller.startswith("roles/") and caller.split("/")[1] != role}
# The run's shared plan (sparkfleet_*) has one owner: the cluster role.
SHARED_FACTS = re.compile(r"^\s+(sparkfleet_(?:engine_group|engine_members|head|head_address|rank|fabric_address|lane|tensor_parallel_size)):", re.M)


def test_the_roles_form_a_directed_acyclic_graph():
    assert ("engine", "preflight") in EDGES  # counted, so that an empty graph cannot pass
    graph = {}
    for caller, callee in EDGES:
        graph.setdefault(caller, set()).add(callee)

    def cycle_from(node, path):
        for callee in sorted(graph.get(node, ())):
            if callee in path:
                return [*path[path.index(callee) :], callee]
            found = cycle_from(callee, [*path, callee])
            if found:
                return found
        return None

    for role in sorted(graph):
        cycle = cycle_from(role, [role])
        assert cycle is None, f"roles include each other in a cycle: {' -> '.join(cycle)}"


def test_preflight_only_checks_and_never_includes_the_engine():
    text = "\n".join(path.read_text() for path in sorted((REPO / "roles/preflight").rglob("*.yml")))
    assert "sparkfleet.vllm.engine" not in text


def test_no_playbook_includes_preflight_to_place_nodes():
    for path in _task_files():
        assert "tasks_from: facts" not in path.read_text(), f"{path.relative_to(REPO)}: the cluster role places the nodes"


def test_only_the_cluster_role_sets_the_runs_plan():
    setters = {}
    for path in [*_task_files(), *sorted((REPO / "playbooks").glob("*.yml"))]:
        for fact in SHARED_FACTS.findall(path.read_text()):
            setters.setdefault(fact, set()).add(str(path.relative_to(REPO)))
    assert setters.get("sparkfleet_lane") == {"roles/cluster/tasks/main.yml"}, setters
    assert all(files == {"roles/cluster/tasks/main.yml"} for files in setters.values()), setters


# --- each engine entry point documents exactly the options it reads ----------------------------------------------

ENGINE = REPO / "roles/engine"
ENGINE_TOKEN = re.compile(r"\b(engine_[a-z0-9_]+)\b")


def _engine_files(entry, seen=None):
    """The task file of an entry point and every file it includes or imports, within the role."""
    seen = set() if seen is None else seen
    path = ENGINE / "tasks" / f"{entry}.yml"
    if path in seen or not path.is_file():
        return seen
    seen.add(path)
    for included in re.findall(r"(?:include_tasks|import_tasks):\s*([a-z_]+)\.yml", path.read_text()):
        _engine_files(included, seen)
    return seen


def _engine_reads(entry, options):
    """The options an entry point reads: named in its files, and through the defaults and computed values (vars/)
    those read in turn. What the render reads through the flag table is declared and checked by the table
    (serve_flag_argument_spec), not listed here."""
    from ansible_collections.sparkfleet.vllm.plugins.module_utils.serve_args import OTHER_SETTINGS

    files = _engine_files(entry)
    names = {name for path in files for name in ENGINE_TOKEN.findall(path.read_text())}
    if ENGINE / "tasks/render.yml" in files:
        names |= set(OTHER_SETTINGS.values())  # the model, GPUs per node, TP and PP: no flag row of their own
    defaults = yaml.safe_load((ENGINE / "defaults/main.yml").read_text()) | yaml.safe_load((ENGINE / "vars/main.yml").read_text())
    todo = list(names)
    while todo:
        for name in ENGINE_TOKEN.findall(yaml.safe_dump(defaults.get(todo.pop()))):
            if name not in names:
                names.add(name)
                todo.append(name)
    return names & options


@pytest.mark.parametrize("entry", sorted(_entry_points("engine")))
def test_each_engine_entry_point_lists_only_the_options_it_reads(entry):
    specs = yaml.safe_load((ENGINE / "meta/argument_specs.yml").read_text())["argument_specs"]
    every_option = {name for spec in specs.values() for name in spec["options"]}
    listed = set(specs[entry]["options"])
    read = _engine_reads(entry, every_option)
    assert listed == read, f"engine {entry}: lists but does not read {sorted(listed - read)}; reads but does not list {sorted(read - listed)}"
