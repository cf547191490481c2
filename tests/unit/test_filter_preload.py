"""Our filter files and the module_utils behind them, loaded once in ansible-playbook (plugin_utils/filter_preload.py,
callback sparkfleet.vllm.preload_filters) so that the task workers it forks inherit them.

ansible-core's plugin loader is set up only in fresh interpreters here (never in the pytest process): a Python one
that calls preload() as the callback does, and the real ansible-playbook with the callback enabled as ansible.cfg
enables it. What it saves a run is a speed figure: benchmarks/filter_preload.py prints it."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils import filter_preload

REPO = pathlib.Path(__file__).resolve().parents[2]
PLUGINS = REPO / "plugins"

# preload() as the callback calls it, in an interpreter whose plugin loader finds this checkout's collection;
# argv[1]: the filter directory to read the module_utils names from; a FAILING_LOADER environment variable stands a
# loader that raises in for ansible-core's.
PRELOAD = textwrap.dedent(
    """
    import json, os, sys
    from ansible.plugins.loader import filter_loader, init_plugin_loader
    init_plugin_loader([os.environ["COLLECTIONS"]])
    from ansible_collections.sparkfleet.vllm.plugins.plugin_utils import filter_preload

    class FailingLoader:
        def get(self, name):
            raise ValueError("a filter file raised on import")

    loader = FailingLoader() if os.environ.get("FAILING_LOADER") else filter_loader
    said, problems = filter_preload.preload(loader, sys.argv[1])
    loaded = [name for name in sys.modules if name.startswith("ansible_collections.sparkfleet.vllm.plugins.")]
    print(json.dumps({"said": said, "problems": problems, "loaded": loaded}))
    """
)


def _preload(filter_dir=PLUGINS / "filter", **env):
    result = subprocess.run(
        [sys.executable, "-c", PRELOAD, str(filter_dir)],
        env={**os.environ, "COLLECTIONS": str(REPO / "collections"), **env}, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(result.stdout)


def _loaded(kind, loaded):
    prefix = f"ansible_collections.sparkfleet.vllm.plugins.{kind}."
    return {name.removeprefix(prefix) for name in loaded if name.startswith(prefix)}


def test_the_module_utils_behind_the_filters_are_read_from_the_filter_files():
    names = filter_preload.module_utils_behind_filters()
    # Deferred by name (deferred("serve_args", ...)) and imported inside a filter (module_utils("engine_progress")).
    assert {"serve_args", "gpu_memory", "access", "nccl_pin", "nvidia_driver", "dpkg", "engine_progress", "vllm_patches"} <= set(names)
    # Only modules and action plugins import these: ansible-playbook need not hold them.
    assert not {"stream_client", "run_lock", "fanout"} & set(names)
    assert all((PLUGINS / "module_utils" / f"{name}.py").is_file() for name in names), names


def test_a_new_filter_files_module_utils_count_at_once(tmp_path):
    (tmp_path / "new.py").write_text('FILTERS = {"a": deferred("kv_capacity", "predict"), "b": lambda: module_utils("fabric")}\n')
    assert filter_preload.module_utils_behind_filters(tmp_path) == ["fabric", "kv_capacity"]


def test_preload_leaves_every_filter_file_and_the_module_utils_behind_them_loaded():
    preloaded = _preload()
    assert preloaded["problems"] == []
    assert _loaded("filter", preloaded["loaded"]) >= {path.stem for path in (PLUGINS / "filter").glob("*.py")}
    assert _loaded("module_utils", preloaded["loaded"]) >= set(filter_preload.module_utils_behind_filters())
    assert "stream_client" not in _loaded("module_utils", preloaded["loaded"])
    # What it says it loaded is what is loaded, each once.
    ours = {name.removeprefix("ansible_collections.sparkfleet.vllm.plugins.") for name in preloaded["loaded"]}
    assert preloaded["said"] == sorted(name for name in ours if "." in name)


def test_what_fails_to_load_is_one_line_each_and_the_rest_still_loads(tmp_path):
    (tmp_path / "new.py").write_text('FILTERS = {"a": deferred("no_such_module", "f"), "b": deferred("gpu_memory", "check_gmu")}\n')
    preloaded = _preload(tmp_path, FAILING_LOADER="1")
    assert preloaded["problems"][0] == "the filter files: a filter file raised on import"
    assert preloaded["problems"][1].startswith("module_utils/no_such_module: No module named"), preloaded["problems"]
    assert len(preloaded["problems"]) == 2
    assert "gpu_memory" in _loaded("module_utils", preloaded["loaded"])


def test_a_playbook_with_the_callback_enabled_by_ansible_cfg_runs_our_filters_and_says_what_it_loaded_at_vvv(tmp_path):
    (tmp_path / "hosts.yml").write_text(
        f"all:\n  hosts:\n    a: {{}}\n    b: {{}}\n  vars:\n    ansible_connection: local\n    ansible_python_interpreter: {sys.executable}\n"
    )
    (tmp_path / "play.yml").write_text(
        textwrap.dedent(
            """
            - hosts: all
              gather_facts: false
              tasks:
                - ansible.builtin.debug:
                    msg: "gmu {{ '0.85' | sparkfleet.vllm.checked_gmu }}, driver {{ '1:580.95.05-0ubuntu1' | sparkfleet.vllm.upstream_version }}"
            """
        )
    )
    result = subprocess.run(
        [str(pathlib.Path(sys.executable).parent / "ansible-playbook"), "-vvv", "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml")],
        cwd=REPO, env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    said = [line for line in result.stdout.splitlines() if line.startswith("preload_filters:")]
    assert len(said) == 1, said  # at -vvv, what it loaded; nothing it could not load
    files = int(said[0].split()[1])
    assert files >= len(list((PLUGINS / "filter").glob("*.py"))) + len(filter_preload.module_utils_behind_filters()), said
    assert said[0].endswith("files of sparkfleet.vllm loaded before any worker forks"), said
    assert result.stdout.count("gmu 0.85, driver 580.95.05") == 2
