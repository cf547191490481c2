"""serve_args: lanes and settings -> argv/env, checked against vLLM's own parser."""

from __future__ import annotations

import json
import pathlib
from unittest import mock

import pytest
import yaml

from ansible_collections.sparkfleet.vllm.plugins.module_utils import serve_args as sa

REPO = pathlib.Path(__file__).resolve().parents[2]
LANES = yaml.safe_load((REPO / "playbooks/group_vars/all/lanes.yml").read_text())["lanes"]
PROFILES = yaml.safe_load((REPO / "playbooks/group_vars/all/profiles.yml").read_text())["profiles"]
HEAD = "192.168.100.11"


def settings_for(profile_name, **overrides):
    """The settings the engine role assembles, from the profile data and the role's plain defaults."""
    profile = PROFILES[profile_name]
    settings = {
        "model_path": profile["model_path"],
        "served_model_name": "glm-5.3-flash",
        "host": "0.0.0.0",
        "port": 8000,
        "trust_remote_code": True,
        "dtype": profile["dtype"],
        "load_format": profile["load_format"],
        "reasoning_parser": "glm45",
        "tool_call_parser": "glm47",
        "enable_auto_tool_choice": True,
        "mtp_num_speculative_tokens": profile["mtp_num_speculative_tokens"],
        "speculative_method": profile.get("speculative_method"),
        "tensor_parallel_size": None,
        "pipeline_parallel_size": 1,
        "max_num_batched_tokens": 8192,
        "gpu_memory_utilization": 0.85,
        "block_size": profile["block_size"],
        "kv_cache_dtype": profile["kv_cache_dtype"],
        "async_scheduling": profile.get("async_scheduling", True),
        "enforce_eager": profile["enforce_eager"],
        "distributed_executor_backend": "mp",
        "api_key": "",
        "extra_args": [],
    }
    settings.update(overrides)
    return settings


def render(profile="gb10", lane="500k", rank=0, nnodes=4, **overrides):
    return sa.serve_argv(settings_for(profile, **overrides), sa.checked_lane(LANES, lane), rank, nnodes, HEAD, 29500)


def flag(argv, name):
    return argv[argv.index(name) + 1]


# --- the recipe's argv ----------------------------------------------------------


@pytest.mark.parametrize(("lane", "length", "seqs"), [("200k", "200000", "15"), ("500k", "500000", "5"), ("1m", "1000000", "3")])
def test_gb10_head_argv_per_lane_is_the_recipe(lane, length, seqs):
    argv = render("gb10", lane)
    assert argv == [
        "vllm", "serve", "/model",
        "--served-model-name", "glm-5.3-flash", "--host", "0.0.0.0", "--port", "8000",
        "--trust-remote-code",
        "--reasoning-parser", "glm45", "--tool-call-parser", "glm47", "--enable-auto-tool-choice",
        "--speculative-config", '{"method":"mtp","num_speculative_tokens":4}',
        "--tensor-parallel-size", "4", "--pipeline-parallel-size", "1",
        "--max-model-len", length, "--max-num-seqs", seqs,
        "--max-num-batched-tokens", "8192", "--gpu-memory-utilization", "0.85",
        "--block-size", "2304", "--kv-cache-dtype", "fp8_e4m3", "--async-scheduling",
        "--distributed-executor-backend", "mp",
        "--nnodes", "4", "--node-rank", "0", "--master-addr", HEAD, "--master-port", "29500",
    ]  # fmt: skip
    assert "--enforce-eager" not in argv  # CUDA graphs stay on for gb10


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_workers_are_headless_with_their_rank(rank):
    argv = render(rank=rank)
    assert argv[-1] == "--headless"
    assert flag(argv, "--node-rank") == str(rank)
    assert render(rank=0).count("--headless") == 0


def test_cpu_profile_differs_only_where_it_must():
    gb10, cpu = render("gb10"), render("cpu")
    assert flag(cpu, "--load-format") == "dummy"
    assert flag(cpu, "--dtype") == "bfloat16"
    assert cpu[2] == "/model"
    for gone in ("--speculative-config", "--block-size", "--kv-cache-dtype"):
        assert gone in gb10
        assert gone not in cpu
    assert "--enforce-eager" in cpu
    shared = ["--served-model-name", "--max-model-len", "--max-num-seqs", "--max-num-batched-tokens", "--tensor-parallel-size", "--master-port"]
    assert [flag(cpu, name) for name in shared] == [flag(gb10, name) for name in shared]


def test_speculative_config_and_k_off():
    assert json.loads(flag(render(mtp_num_speculative_tokens=3), "--speculative-config")) == {"method": "mtp", "num_speculative_tokens": 3}
    assert "--speculative-config" not in render(mtp_num_speculative_tokens=0)
    with pytest.raises(sa.ServeArgsError, match="mtp_num_speculative_tokens=-1"):
        render(mtp_num_speculative_tokens=-1)


def test_the_drafter_is_mtp_unless_the_settings_name_ngram_and_nothing_else():
    assert json.loads(flag(render(speculative_method=None), "--speculative-config"))["method"] == "mtp"
    assert json.loads(flag(render(speculative_method="ngram"), "--speculative-config"))["method"] == "ngram"
    with pytest.raises(sa.ServeArgsError, match=r"^engine_speculative_method='eagle' is not one of mtp, ngram: use mtp"):
        render(speculative_method="eagle")
    assert "--speculative-config" not in render(mtp_num_speculative_tokens=0, speculative_method="ngram")


def test_extra_args_come_before_the_ranks_place_and_must_be_a_list():
    argv = render(rank=1, extra_args=["--enable-prefix-caching"])
    assert argv[argv.index("--nnodes") - 1] == "--enable-prefix-caching"
    assert argv[-1] == "--headless"
    with pytest.raises(sa.ServeArgsError, match="must be a list"):
        render(extra_args="--enable-prefix-caching")


def test_the_api_key_never_reaches_argv_and_secrets_are_redacted_for_display():
    # The engine role hands the key to rank 0 as VLLM_API_KEY: argv is readable by every local user.
    assert "--api-key" not in render(api_key="s3cret-key-0123456789")
    assert sa.redact_argv(["vllm", "serve", "--api-key", "s3cret"]) == ["vllm", "serve", "--api-key", sa.REDACTED]
    shown = sa.redact_env({"VLLM_API_KEY": "s3cret", "HF_TOKEN": "hf_x", "NCCL_DEBUG": "WARN", "HF_HOME": ""})
    assert shown == {"VLLM_API_KEY": sa.REDACTED, "HF_TOKEN": sa.REDACTED, "NCCL_DEBUG": "WARN", "HF_HOME": ""}


# --- bad input, with the documented messages --------------------------------


def test_unknown_lane_lists_the_valid_ones():
    with pytest.raises(sa.ServeArgsError) as error:
        sa.checked_lane(LANES, "300k")
    assert str(error.value).startswith("Unknown lane '300k'. Valid lanes: 1m, 200k, 500k.")


@pytest.mark.parametrize(
    ("lane", "message"),
    [
        ({"max_num_seqs": 5}, "Lane 'bad' has no max_model_len"),
        ({"max_model_len": 0, "max_num_seqs": 5}, "Lane 'bad' has max_model_len=0: it must be a positive integer"),
        ({"max_model_len": 1000, "max_num_seqs": -2}, "Lane 'bad' has max_num_seqs=-2"),
        ({"max_model_len": "lots", "max_num_seqs": 2}, "max_model_len='lots'"),
        ({"max_model_len": True, "max_num_seqs": 2}, "max_model_len=True"),
        ({"max_model_len": 1000, "max_num_seqs": 2, "max_seqs": 3}, "unknown keys ['max_seqs']"),
    ],
)
def test_bad_lane_values(lane, message):
    with pytest.raises(sa.ServeArgsError) as error:
        sa.checked_lane(dict(LANES, bad=lane), "bad")
    assert message in str(error.value)
    assert "Valid lanes: 1m, 200k, 500k, bad" in str(error.value)


def test_lane_above_the_native_maximum():
    lanes = dict(LANES, **{"2m": {"max_model_len": 2_000_000, "max_num_seqs": 1}})
    with pytest.raises(sa.ServeArgsError, match=r"max_model_len=2000000, above the model's native maximum of 1048576 tokens"):
        sa.checked_lane(lanes, "2m", PROFILES["gb10"]["native_max_model_len"])
    assert sa.checked_lane(LANES, "1m", 1_048_576) == {"name": "1m", "max_model_len": 1_000_000, "max_num_seqs": 3}


def test_tensor_parallel_mismatch_names_the_fix():
    assert sa.tensor_parallel_size(None, 4) == 4
    assert sa.tensor_parallel_size(2, 2) == 2
    with pytest.raises(sa.ServeArgsError) as error:
        sa.tensor_parallel_size(8, 4)
    assert str(error.value).startswith("engine_tensor_parallel_size=8 x pipeline 1 needs 8 GPUs, but the engine group has 4 node(s)")
    assert "set engine_tensor_parallel_size to 4 or leave it unset" in str(error.value)
    with pytest.raises(sa.ServeArgsError, match="must be a positive integer"):
        sa.tensor_parallel_size("four", 4)


def test_rank_outside_the_engine():
    with pytest.raises(sa.ServeArgsError, match="Rank 4 is outside an engine of 4 nodes"):
        render(rank=4)


# --- environment --------------------------------------------------------------


def test_env_layers_merge_in_order_and_none_unsets():
    env = sa.engine_env({"A": 1, "B": "x", "C": True}, {"B": "y", "NCCL_DEBUG": "WARN"}, {"NCCL_DEBUG": None, "D": 2.5})
    assert env == {"A": "1", "B": "y", "C": "1", "D": "2.5"}
    with pytest.raises(sa.ServeArgsError, match="'BAD-NAME' is not valid"):
        sa.engine_env({"BAD-NAME": "1"})


def test_gb10_profile_env_is_the_recipe():
    env = sa.engine_env(PROFILES["gb10"]["env"])
    assert env["VLLM_ENGINE_READY_TIMEOUT_S"] == "3600"
    assert env["TORCH_CUDA_ARCH_LIST"] == "12.1a"
    assert env["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"


def test_lane_overrides_replace_the_lanes_numbers_and_are_named():
    lane = sa.checked_lane(LANES, "500k", 1048576, overrides={"max_model_len": 900000, "max_num_seqs": None})
    assert lane == {"name": "500k", "max_model_len": 900000, "max_num_seqs": 5, "overridden": ["max_model_len"]}
    assert "overridden" not in sa.checked_lane(LANES, "500k", 1048576, overrides={})
    with pytest.raises(sa.ServeArgsError, match=r"lower lane_overrides\.max_model_len to at most 1048576"):
        sa.checked_lane(LANES, "500k", 1048576, overrides={"max_model_len": 2000000})
    with pytest.raises(sa.ServeArgsError, match=r"lane_overrides.max_num_seqs='x' must be a positive integer \(GLM53_SEQS\)"):
        sa.checked_lane(LANES, "500k", overrides={"max_num_seqs": "x"})
    with pytest.raises(sa.ServeArgsError, match="unknown keys"):
        sa.checked_lane(LANES, "500k", overrides={"block_size": 16})


# --- extra args may not set what a setting or the lane owns ---------------------------------


@pytest.mark.parametrize(
    ("extra", "owner"),
    [
        (["--max-model-len", "9"], "the lane (-e lane=..., lanes / lane_overrides)"),
        (["--max_num_seqs=2"], "the lane"),
        (["--gpu-memory-utilization", "0.9"], "engine_gpu_memory_utilization"),
        (["--no-enforce-eager"], "engine_enforce_eager"),
        (["--enforce-eager"], "engine_enforce_eager"),  # owned even where the profile said false (not rendered)
        (["--node-rank", "1"], "the node's place in the engine group"),
        (["--headless"], "the rank"),
    ],
)
def test_extra_args_may_not_set_a_flag_another_setting_owns(extra, owner):
    with pytest.raises(sa.ServeArgsError) as refused:
        render("gb10", extra_args=extra)
    message = str(refused.value)
    assert message.startswith("engine_extra_args sets --")
    assert f"which {owner}" in message
    assert "vLLM would take the last of the two silently" in message


def test_extra_args_may_set_what_nothing_else_renders():
    """The nvfp4 profile's own --kv-cache-memory-bytes: no setting renders it there, so it is the profile's."""
    argv = render("gb10_nvfp4", nnodes=2, extra_args=PROFILES["gb10_nvfp4"]["extra_args"])
    assert flag(argv, "--kv-cache-memory-bytes") == "6442450944"
    assert flag(argv, "--moe-backend") == "marlin"


def test_an_extra_flag_given_twice_is_refused():
    with pytest.raises(sa.ServeArgsError, match="engine_extra_args sets --moe-backend twice"):
        render("gb10", extra_args=["--moe-backend", "marlin", "--moe-backend=triton"])


# --- every lane parsed at once (the engine role's argv check) ---------------------------


def test_every_lane_is_rendered_per_rank_and_a_lane_that_does_not_check_is_left_out():
    lanes = {**LANES, "2m": {"max_model_len": 2_000_000, "max_num_seqs": 1}}
    by_lane = sa.serve_argv_by_lane(settings_for("gb10"), lanes, 1, 4, HEAD, 29500, native_max_model_len=1_048_576)
    assert sorted(by_lane) == ["1m", "200k", "500k"]  # 2m is above the model's native length
    assert by_lane["200k"] == render("gb10", "200k", rank=1)
    assert flag(by_lane["1m"], "--max-model-len") == "1000000"


def test_argv_sets_hold_this_run_and_every_other_lane_all_ranks_had():
    ranks = range(2)
    current = [render("cpu", "500k", rank=rank, nnodes=2) for rank in ranks]
    by_lane = [sa.serve_argv_by_lane(settings_for("cpu"), LANES, rank, 2, HEAD, 29500) for rank in ranks]
    by_lane[1].pop("1m")  # a lane one rank did not render is not a set
    sets = sa.argv_sets(current, by_lane)
    assert sorted(sets) == ["200k", "current"]  # 500k is this run's own argv: not parsed twice
    assert sets["200k"] == [render("cpu", "200k", rank=rank, nnodes=2) for rank in ranks]


def test_the_record_of_a_set_depends_on_the_image_and_every_argv():
    argvs = [render("cpu", rank=rank) for rank in range(4)]
    sha = sa.argv_set_sha(argvs, "sha256:aa")
    assert sha == sa.argv_set_sha([list(argv) for argv in argvs], "sha256:aa")
    assert sha != sa.argv_set_sha(argvs, "sha256:bb")
    assert sha != sa.argv_set_sha([*argvs[:3], render("cpu", "200k", rank=3)], "sha256:aa")


def test_only_sets_no_rank_refused_are_accepted():
    verdict = {"vllm": "0.32.0", "sets": {"current": [{"rank": 0, "error": None}], "1m": [{"rank": 0, "error": "bad"}]}}
    assert sa.accepted_argv_sets(verdict) == ["current"]
    assert sa.accepted_argv_sets({}) == []


def test_the_dry_runs_diff_names_the_flags_variables_image_and_mounts_that_changed_and_hides_secrets():
    running = {
        "argv": render("gb10", "500k"),
        "env": ["PATH=/usr/bin", "VLLM_API_KEY=sk-old", "NCCL_DEBUG=WARN"],
        "image": "sha256:aa",
        "volumes": ["/opt/p/1:/x:ro"],
    }
    wanted = {"argv": render("gb10", "1m"), "env": {"VLLM_API_KEY": "sk-new", "NCCL_DEBUG": "INFO"},
              "image": "sha256:aa", "volumes": ["/opt/p/2:/x:ro"]}  # fmt: skip
    diff = sa.rank_restart_diff(running, wanted)
    assert diff[:2] == ["--- running", "+++ this run"]
    changed = [line for line in diff[2:] if line[:1] in "+-"]
    assert "---max-model-len 500000" in changed
    assert "+--max-model-len 1000000" in changed
    assert "-NCCL_DEBUG=WARN" in changed
    assert "+NCCL_DEBUG=INFO" in changed
    assert "-mount /opt/p/1:/x:ro" in changed
    assert "+mount /opt/p/2:/x:ro" in changed
    assert not [line for line in diff if "PATH=" in line or "image " in line]  # the image's own variables; the same image
    assert not [line for line in diff if "sk-" in line]  # the key changed, its values are never shown
    same = {**wanted, "argv": list(wanted["argv"])}
    assert sa.rank_restart_diff(same, wanted) == []


# --- the flag table --------------------------------------------------------------------------------------------


ENGINE_DEFAULTS = yaml.safe_load((REPO / "roles/engine/defaults/main.yml").read_text())
ENGINE_OPTIONS = yaml.safe_load((REPO / "roles/engine/meta/argument_specs.yml").read_text())["argument_specs"]["main"]["options"]


def test_the_flag_table_is_the_argv_the_owners_and_the_settings():
    argv = sa.serve_argv(settings_for("gb10"), LANES["500k"], 1, 4, HEAD, 29500)
    rendered = [item[2:] for item in argv if item.startswith("--")]
    table = [row.flag for row in sa.FLAGS]
    assert rendered == [flag for flag in table if flag in rendered]  # the argv follows the table's order
    assert set(sa.FLAG_OWNERS) == set(table)
    # The recipe's bare flags are rendered bare; a new bare row joins them without touching this test.
    assert {"trust-remote-code", "enable-auto-tool-choice", "async-scheduling", "enforce-eager", "headless"} <= sa.BOOLEAN_FLAGS
    assert "port" not in sa.BOOLEAN_FLAGS
    assert sa.flag_variables()["dtype"] == "engine_dtype"
    assert sa.flag_variables()["host"] == "engine_api_host"


ENGINE_SPECS = yaml.safe_load((REPO / "roles/engine/meta/argument_specs.yml").read_text())["argument_specs"]


def _words(description):
    return " ".join(" ".join(description if isinstance(description, list) else [description]).split())


@pytest.mark.parametrize("variable", sorted(set(sa.flag_variables().values())))
def test_every_setting_of_the_flag_table_has_a_default_and_is_declared_once(variable):
    """A flag's setting: a default in the role, its type and description in its row of the table (the render checks
    the value against them). Where an entry point lists it too (other tasks read it), the same type and words."""
    assert variable in ENGINE_DEFAULTS, f"add {variable} to roles/engine/defaults/main.yml"
    spec = sa.flag_argument_spec().get(variable) or ENGINE_OPTIONS.get(variable)
    assert spec, f"give {variable}'s row of the flag table its setting (type, description)"
    for entry, options in ((entry, spec_["options"]) for entry, spec_ in ENGINE_SPECS.items()):
        if variable in options and variable in sa.flag_argument_spec():
            listed = options[variable]
            assert (listed["type"], _words(listed["description"])) == (spec["type"], _words(spec["description"])), (entry, variable)


def test_adding_a_flag_is_a_row_and_a_default():
    """The table declares a new setting: the render's argument spec and its argv follow from the row alone."""
    row = sa.Flag("max-num-partial-prefills", "max_num_partial_prefills", "engine_max_num_partial_prefills", setting={"type": "int", "description": "x"})
    table = (*sa.FLAGS[:-5], row, *sa.FLAGS[-5:])
    with mock.patch.object(sa, "FLAGS", table):
        assert sa.flag_argument_spec()["engine_max_num_partial_prefills"] == {"type": "int", "description": "x"}
        assert sa.flag_variables()["max_num_partial_prefills"] == "engine_max_num_partial_prefills"
        argv = sa.serve_argv({**settings_for("gb10"), "max_num_partial_prefills": 2}, LANES["500k"], 0, 4, HEAD, 29500)
    assert argv[argv.index("--max-num-partial-prefills") + 1] == "2"


def test_a_row_naming_another_roles_variable_is_refused():
    with pytest.raises(sa.ServeArgsError, match=r"are not variables of role 'preflight'"):
        sa.flag_variables("preflight")
