# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Lanes and vLLM serve settings -> the argv and environment of one engine rank.

Pure Python, no Ansible imports: used by the `serve_argv` and `checked_lane`
filters and unit-tested on its own. The argv is always a list (it becomes the
container's command), never a shell string.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Any, NamedTuple

# Settings whose secret values must never be shown (argv printed to users).
SECRET_FLAGS = frozenset({"--api-key"})
# The head receives the API key in its environment, never in argv (readable by every local user).
SECRET_ENV = frozenset({"VLLM_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"})
REDACTED = "<redacted>"

_LANE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class ServeArgsError(ValueError):
    """A setting that cannot produce a valid engine; the message names the fix."""


def _positive_int(value):
    """Return value as int when it is a positive integer (bools refused)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, str) and value.strip().isdigit():
        number = int(value.strip())
        return number if number > 0 else None
    return None


def checked_lane(lanes, lane, native_max_model_len=None, overrides=None):
    """Return the lane's settings {name, max_model_len, max_num_seqs} or raise.

    overrides: {max_model_len, max_num_seqs} that replace the lane's own (the
    recipe's GLM53_MAXLEN / GLM53_SEQS; `lane_overrides` in the inventory or -e);
    the result names them in `overridden`. Every message lists the valid lanes,
    since the usual fix is picking one.
    """
    if not isinstance(lanes, dict) or not lanes:
        raise ServeArgsError("`lanes` must be a mapping of lane names to {max_model_len, max_num_seqs}; it is empty or not a mapping.")
    valid = ", ".join(sorted(str(name) for name in lanes))
    name = str(lane)
    if name not in lanes:
        raise ServeArgsError(f"Unknown lane '{name}'. Valid lanes: {valid}. Pick one with -e lane=NAME, or add it under `lanes` in group_vars.")
    if not _LANE_NAME.match(name):
        raise ServeArgsError(f"Lane name '{name}' must be letters, digits, '.', '_' or '-'. Valid lanes: {valid}.")
    spec = lanes[name]
    if not isinstance(spec, dict):
        raise ServeArgsError(f"Lane '{name}' must be a mapping with max_model_len and max_num_seqs, got {spec!r}. Valid lanes: {valid}.")
    overrides = {key: value for key, value in (overrides or {}).items() if value is not None}
    unknown_overrides = sorted(set(overrides) - {"max_model_len", "max_num_seqs"})
    if unknown_overrides:
        raise ServeArgsError(f"lane_overrides has unknown keys {unknown_overrides}: it may set max_model_len and max_num_seqs.")
    for key, value in overrides.items():
        if _positive_int(value) is None:
            raise ServeArgsError(f"lane_overrides.{key}={value!r} must be a positive integer (GLM53_{'MAXLEN' if key == 'max_model_len' else 'SEQS'}).")
    spec = {**spec, **overrides}
    checked = {"name": name}
    for key in ("max_model_len", "max_num_seqs"):
        if key not in spec or spec[key] is None:
            raise ServeArgsError(f"Lane '{name}' has no {key}: set lanes.{name}.{key} to a positive integer. Valid lanes: {valid}.")
        number = _positive_int(spec[key])
        if number is None:
            raise ServeArgsError(f"Lane '{name}' has {key}={spec[key]!r}: it must be a positive integer. Valid lanes: {valid}.")
        checked[key] = number
    unknown = sorted(set(spec) - {"max_model_len", "max_num_seqs", "description"})
    if unknown:
        raise ServeArgsError(
            f"Lane '{name}' has unknown keys {unknown}: a lane holds max_model_len, max_num_seqs and an optional description. Valid lanes: {valid}."
        )
    if native_max_model_len is not None:
        native = _positive_int(native_max_model_len)
        if native is None:
            raise ServeArgsError(f"The model's native maximum length {native_max_model_len!r} must be a positive integer.")
        if checked["max_model_len"] > native:
            raise ServeArgsError(
                f"Lane '{name}' has max_model_len={checked['max_model_len']}, above the model's native maximum of {native} tokens: "
                f"lower {'lane_overrides' if 'max_model_len' in overrides else 'lanes.' + name}.max_model_len to at most {native}. "
                f"Valid lanes: {valid}."
            )
    if overrides:
        checked["overridden"] = sorted(overrides)
    return checked


def tensor_parallel_size(requested, nnodes, gpus_per_node=1, pipeline_parallel_size=1):
    """The engine's TP size: all GPUs of the engine's nodes unless set; a mismatch is an error."""
    nodes = _positive_int(nnodes)
    if nodes is None:
        raise ServeArgsError(f"The engine group has {nnodes!r} nodes: it needs at least one host.")
    pp = _positive_int(pipeline_parallel_size)
    gpus = _positive_int(gpus_per_node)
    if pp is None or gpus is None:
        raise ServeArgsError(f"pipeline_parallel_size={pipeline_parallel_size!r} and gpus_per_node={gpus_per_node!r} must be positive integers.")
    world = nodes * gpus
    if requested in (None, "", "auto"):
        if world % pp:
            raise ServeArgsError(f"pipeline_parallel_size={pp} does not divide the {world} GPUs of the {nodes} engine nodes.")
        return world // pp
    tp = _positive_int(requested)
    if tp is None:
        raise ServeArgsError(f"engine_tensor_parallel_size={requested!r} must be a positive integer (or unset: one rank per GPU of the engine nodes).")
    if tp * pp != world:
        raise ServeArgsError(
            f"engine_tensor_parallel_size={tp} x pipeline {pp} needs {tp * pp} GPUs, but the engine group has {nodes} node(s) "
            f"with {gpus} GPU each ({world}): set engine_tensor_parallel_size to {world // pp} or leave it unset, "
            f"or change the engine group in the inventory."
        )
    return tp


# Drafters that need no draft model of their own: GLM's MTP head (the model's own layers), and vLLM's n-gram
# drafter (the same speculative-decoding metrics; molecule's two-engines case runs it on a model without MTP head).
SPECULATIVE_METHODS = ("mtp", "ngram")


def speculative_config(num_speculative_tokens, method="mtp"):
    """The --speculative-config JSON, or None when speculative decoding is off."""
    if num_speculative_tokens in (None, 0, "0", False):
        return None
    k = _positive_int(num_speculative_tokens)
    if k is None:
        raise ServeArgsError(f"mtp_num_speculative_tokens={num_speculative_tokens!r} must be 0 (off) or a positive integer (the recipe uses 3 or 4).")
    if method not in SPECULATIVE_METHODS:
        raise ServeArgsError(
            f"engine_speculative_method={method!r} is not one of {', '.join(SPECULATIVE_METHODS)}: "
            "use mtp (the model's MTP head, GLM-5.3) or ngram (vLLM's n-gram drafter, no draft model)."
        )
    return json.dumps({"method": method, "num_speculative_tokens": k}, separators=(",", ":"))


def _speculative(pair):
    return speculative_config(*pair)


def _flag(argv, name, value):
    """Append --name value; True -> bare flag; None/False/"" -> omitted."""
    if value is None or value is False or value == "":
        return
    if value is True:
        argv.append(f"--{name}")
        return
    if isinstance(value, (dict, list)):
        value = json.dumps(value, separators=(",", ":"))
    argv.extend([f"--{name}", str(value)])


class Flag(NamedTuple):
    """One vLLM flag serve_argv renders: where its value comes from and how it becomes argv."""

    flag: str  # vLLM's name, without the dashes
    key: str  # its key in serve_argv's settings, or of the values serve_argv computes (the lane, the rank's place)
    owner: str  # what a user sets to change it: the engine role's variable, or where the value comes from
    render: Callable[[Any], Any] = lambda value: value  # the value -> argv: None, False or "" omit the flag, True is bare
    default: Any = None  # when the settings do not carry the key
    setting: dict | None = None  # the owner variable's argument spec (type, description): the render checks it


def _bare(value):
    return bool(value)


def _unless_auto(value):
    return None if value in (None, "auto") else value


def _setting(kind, description):
    return {"type": kind, "description": description}


_LANE = "the lane (-e lane=..., lanes / lane_overrides)"

# The flag table: one row per flag, in the argv's order (the recipe's); the engine's extra args go between
# the settings' flags and the rank's place. A row whose owner is an engine_* variable is a setting of the
# engine role: its default is in roles/engine/defaults/main.yml, its type and description here (the render
# checks every one against it: filter serve_flag_argument_spec), and the render passes it (filter
# serve_flag_variables). Adding a flag is a row here and a default there. A setting other tasks read as well
# is also an option of their entry points (argument_specs), with the same type and description (unit test).
FLAGS = (
    Flag("served-model-name", "served_model_name", "engine_served_model_name", setting=_setting("str", "The model name clients ask for.")),
    Flag(
        "host",
        "host",
        "engine_api_host",
        default="0.0.0.0",
        setting=_setting("str", "Address the head's API binds to (an IP address; 0.0.0.0 = every interface, 127.0.0.1 = the head only)."),
    ),
    Flag("port", "port", "engine_port", default=8000, setting=_setting("int", "The head's API port.")),
    Flag("trust-remote-code", "trust_remote_code", "engine_trust_remote_code", _bare, setting=_setting("bool", "Pass --trust-remote-code.")),
    Flag("dtype", "dtype", "engine_dtype", _unless_auto, setting=_setting("str", "--dtype (C(auto) omits the flag).")),
    Flag(
        "load-format",
        "load_format",
        "engine_load_format",
        _unless_auto,
        setting=_setting("str", "--load-format (C(auto) omits the flag; C(dummy) on the cpu profile)."),
    ),
    Flag("reasoning-parser", "reasoning_parser", "engine_reasoning_parser", setting=_setting("str", "vLLM reasoning parser; empty for none.")),
    Flag("tool-call-parser", "tool_call_parser", "engine_tool_call_parser", setting=_setting("str", "vLLM tool-call parser; empty for none.")),
    Flag(
        "enable-auto-tool-choice",
        "enable_auto_tool_choice",
        "engine_enable_auto_tool_choice",
        _bare,
        setting=_setting("bool", "Pass --enable-auto-tool-choice."),
    ),
    # k and the drafter: two settings, one flag (the row's setting is k's; the method's is in OTHER_SETTINGS).
    Flag(
        "speculative-config",
        "speculative",
        "engine_mtp_num_speculative_tokens (with engine_speculative_method)",
        _speculative,
        setting=_setting("int", "MTP speculative tokens (k); 0 turns speculative decoding off."),
    ),
    Flag("tensor-parallel-size", "tensor_parallel", "engine_tensor_parallel_size (the engine group's nodes x engine_gpus_per_node)"),
    Flag("pipeline-parallel-size", "pipeline_parallel", "engine_pipeline_parallel_size"),
    Flag("max-model-len", "max_model_len", _LANE),
    Flag("max-num-seqs", "max_num_seqs", _LANE),
    Flag(
        "max-num-batched-tokens",
        "max_num_batched_tokens",
        "engine_max_num_batched_tokens",
        setting=_setting("int", "--max-num-batched-tokens (4096 is too small with MTP draft slots)."),
    ),
    Flag(
        "gpu-memory-utilization",
        "gpu_memory_utilization",
        "engine_gpu_memory_utilization",
        setting=_setting("float", "--gpu-memory-utilization (the profile's, 0.85; 0.89+ kills a GB10 head with NV_ERR_NO_MEMORY)."),
    ),
    # Sized by the role from gmu x the node's memory where the engine itself would read the host's
    # (vLLM's CPU build reads libnuma's node, not the node's memory cgroup).
    Flag(
        "kv-cache-memory-bytes",
        "kv_cache_memory_bytes",
        "engine_kv_cache_memory_bytes (the profile's kv_cache_from_gmu)",
        setting=_setting(
            "int",
            "C(--kv-cache-memory-bytes) per rank. Computed for profiles with C(kv_cache_from_gmu) (the cpu profile) as gmu x the node's memory"
            " (its memory cgroup's limit where it has one) minus C(non_kv_gib); unset otherwise (vLLM sizes KV from gmu itself on a GPU).",
        ),
    ),
    Flag("block-size", "block_size", "engine_block_size", setting=_setting("int", "--block-size (2304 on SM121); unset for vLLM's default.")),
    Flag(
        "kv-cache-dtype",
        "kv_cache_dtype",
        "engine_kv_cache_dtype",
        _unless_auto,
        setting=_setting("str", "--kv-cache-dtype (fp8_e4m3 on gb10; C(auto) omits the flag)."),
    ),
    Flag("async-scheduling", "async_scheduling", "engine_async_scheduling", _bare, setting=_setting("bool", "Pass --async-scheduling.")),
    Flag("enforce-eager", "enforce_eager", "engine_enforce_eager", _bare, setting=_setting("bool", "Pass --enforce-eager (off on gb10 to keep CUDA graphs).")),
    Flag(
        "distributed-executor-backend",
        "distributed_executor_backend",
        "engine_distributed_executor_backend",
        default="mp",
        setting=_setting("str", "--distributed-executor-backend (multi-node needs mp)."),
    ),
    # The rank's place in the engine comes last, as in the recipe.
    Flag("nnodes", "nnodes", "the engine group in the inventory"),
    Flag("node-rank", "node_rank", "the node's place in the engine group (the inventory)"),
    Flag("master-addr", "master_addr", "the head's fabric address (engine_fabric_address / ansible_host)"),
    Flag("master-port", "master_port", "engine_master_port"),
    Flag("headless", "headless", "the rank (every worker is headless, the head is not)", _bare),
)
_PLACE = ("nnodes", "node-rank", "master-addr", "master-port", "headless")
# The keys serve_argv computes rather than takes from the settings.
_COMPUTED = {
    "speculative", "tensor_parallel", "pipeline_parallel", "max_model_len", "max_num_seqs", "nnodes", "node_rank", "master_addr", "master_port", "headless",
}  # fmt: skip
# The settings serve_argv takes besides the flags' own: the model, the GPUs per node, the parallel sizes, the drafter.
OTHER_SETTINGS = {
    "model_path": "engine_model_path",
    "gpus_per_node": "engine_gpus_per_node",
    "tensor_parallel_size": "engine_tensor_parallel_size",
    "pipeline_parallel_size": "engine_pipeline_parallel_size",
    "mtp_num_speculative_tokens": "engine_mtp_num_speculative_tokens",
    "speculative_method": "engine_speculative_method",
}
# Who sets each flag that serve_argv renders: an extra arg may not set it again (argparse keeps the
# last value, silently). Booleans are owned even when not rendered (their setting said false).
FLAG_OWNERS = {row.flag: row.owner for row in FLAGS}
BOOLEAN_FLAGS = {row.flag for row in FLAGS if row.render is _bare}


def flag_variables(role="engine"):
    """Settings key -> the role's variable, for every setting the role's render passes to serve_argv."""
    variables = {**{row.key: row.owner.split(" ")[0] for row in FLAGS if row.key not in _COMPUTED}, **OTHER_SETTINGS}
    strangers = sorted(variable for variable in variables.values() if not variable.startswith(f"{role}_"))
    if strangers:
        raise ServeArgsError(f"The flag table's settings {', '.join(strangers)} are not variables of role {role!r}.")
    return variables


def flag_argument_spec(role="engine"):
    """The argument spec of every setting the flag table owns ({variable: {type, description}}), which the render
    validates (ansible.builtin.validate_argument_spec): the table is where a flag's setting is declared."""
    flag_variables(role)  # a row naming another role's variable is refused
    return {row.owner.split(" ")[0]: dict(row.setting) for row in FLAGS if row.setting}


def _flag_name(item):
    """'--max_model_len=9' -> 'max-model-len'; 'no-enforce-eager' counts as 'enforce-eager'. None for a value."""
    text = str(item)
    if not text.startswith("--"):
        return None
    name = text[2:].split("=", 1)[0].replace("_", "-")
    return name[3:] if name.startswith("no-") and name[3:] in BOOLEAN_FLAGS else name


def _refuse_owned_flags(extra, rendered):
    """An extra arg that sets a flag the settings or the lane already set is refused, naming the owner."""
    set_here = {name for name in (_flag_name(item) for item in rendered) if name}
    seen = set()
    for item in extra:
        name = _flag_name(item)
        if name is None:
            continue
        if name in FLAG_OWNERS and (name in set_here or name in BOOLEAN_FLAGS):
            raise ServeArgsError(
                f"engine_extra_args sets --{name}, which {FLAG_OWNERS[name]} owns: vLLM would take the last of the two silently. "
                f"Set it there instead and take {item} out of engine_extra_args (or the profile's extra_args)."
            )
        if name in seen:
            raise ServeArgsError(f"engine_extra_args sets --{name} twice (with the profile's extra_args): keep one.")
        seen.add(name)


def serve_argv(settings, lane, rank, nnodes, master_addr, master_port):
    """Render the `vllm serve` argv of one rank.

    settings: the engine role's settings (keys documented in roles/engine/meta/argument_specs.yml).
    lane: a checked lane ({max_model_len, max_num_seqs}).
    Ranks above 0 are headless: no API server, they only join the engine.
    """
    node_rank = int(rank)
    nodes = _positive_int(nnodes)
    if nodes is None or not 0 <= node_rank < nodes:
        raise ServeArgsError(f"Rank {rank!r} is outside an engine of {nnodes!r} nodes.")
    if not master_addr:
        raise ServeArgsError("The head's address (master_addr) is empty: set ansible_host or engine_fabric_address for the head.")
    pp = settings.get("pipeline_parallel_size") or 1
    tp = tensor_parallel_size(settings.get("tensor_parallel_size"), nodes, settings.get("gpus_per_node", 1), pp)

    values = {
        **{row.key: settings.get(row.key, row.default) for row in FLAGS if row.key not in _COMPUTED},
        "speculative": (settings.get("mtp_num_speculative_tokens"), settings.get("speculative_method") or "mtp"),
        "tensor_parallel": tp,
        "pipeline_parallel": pp,
        "max_model_len": lane["max_model_len"],
        "max_num_seqs": lane["max_num_seqs"],
        "nnodes": nodes,
        "node_rank": node_rank,
        "master_addr": master_addr,
        "master_port": master_port,
        "headless": node_rank > 0,
    }
    argv = ["vllm", "serve", str(settings["model_path"])]
    for row in FLAGS:
        if row.flag == _PLACE[0]:
            extra = settings.get("extra_args") or []
            if isinstance(extra, str) or not all(isinstance(item, (str, int, float)) for item in extra):
                raise ServeArgsError(f"engine_extra_args must be a list of strings (one argv item each), got {extra!r}.")
            _refuse_owned_flags(extra, [*argv, *(f"--{flag}" for flag in _PLACE[:4])])
            argv.extend(str(item) for item in extra)
        _flag(argv, row.flag, row.render(values[row.key]))
    return argv


def serve_argv_by_lane(settings, lanes, rank, nnodes, master_addr, master_port, native_max_model_len=None):
    """Every valid lane's argv for one rank, {lane name: argv}, without this run's lane_overrides.

    What the image's vLLM parses once for all lanes (roles/engine/files/check_argv.py), so that a later
    switch to any of them needs no parse. A lane that would not check (above the model's native
    length, say) is left out: the run that picks it gets the lane's own error."""
    argvs = {}
    for name in lanes if isinstance(lanes, dict) else {}:
        try:
            lane = checked_lane(lanes, name, native_max_model_len)
        except ServeArgsError:
            continue
        argvs[str(name)] = serve_argv(settings, lane, rank, nnodes, master_addr, master_port)
    return argvs


def argv_sets(current, by_lane_per_rank):
    """The argv sets the image's vLLM parses in one run: {"current": this run's argv per rank} and, for
    each lane every rank rendered, that lane's argv per rank (left out where it equals this run's)."""
    sets = {"current": list(current)}
    ranks = list(by_lane_per_rank or [])
    common = set.intersection(*(set(rank) for rank in ranks)) if ranks else set()
    for lane in sorted(common):
        argvs = [rank[lane] for rank in ranks]
        if argvs != sets["current"]:
            sets[lane] = argvs
    return sets


def argv_set_sha(argvs, image_id):
    """The name of the head's record that this image's vLLM accepted these argv (one per rank)."""
    return hashlib.sha256((str(image_id) + json.dumps(argvs, separators=(",", ":"))).encode()).hexdigest()


def accepted_argv_sets(verdict):
    """The names of the sets in check_argv.py's verdict that no rank's parse refused."""
    return [name for name, ranks in ((verdict or {}).get("sets") or {}).items() if not any(rank.get("error") for rank in ranks)]


def argv_lines(argv):
    """argv as one line per flag with its value (``vllm serve MODEL`` first), for a readable diff."""
    lines, words = [], [str(word) for word in argv or []]
    for word in words:
        if word.startswith("--") or not lines:
            lines.append(word)
        else:
            lines[-1] += " " + word
    return lines


def rank_restart_diff(running, wanted):
    """What differs between a running rank and this run's, as unified-diff lines (secrets redacted).

    Each side: {argv, env, image, volumes}; the running side as Docker reports the container (env may be
    its list of KEY=value, holding the image's own variables too: only the variables this run sets are
    compared). argv one flag per line, then the image, the mounts and the environment; [] when nothing
    differs. The dry run (--check) shows this for every rank it would restart."""
    import difflib

    def as_dict(env):
        if isinstance(env, dict):
            return dict(env)
        return dict(item.split("=", 1) if "=" in item else (item, "") for item in env or [])

    keys = set(as_dict(wanted.get("env")))

    def text(side):
        env = {key: value for key, value in as_dict(side.get("env")).items() if key in keys}
        shown = redact_env(env)
        return (
            argv_lines(redact_argv(side.get("argv")))
            + [f"image {side.get('image') or '(none)'}"]
            + [f"mount {volume}" for volume in sorted(side.get("volumes") or [])]
            + [f"{key}={shown[key]}" for key in sorted(shown)]
        )

    return list(difflib.unified_diff(text(running or {}), text(wanted), "running", "this run", lineterm="", n=0))


def redact_argv(argv):
    """A copy of argv with secret values replaced, for logs and reports."""
    shown = list(argv)
    for index, item in enumerate(shown[:-1]):
        if item in SECRET_FLAGS:
            shown[index + 1] = REDACTED
    return shown


def redact_env(env):
    """A copy of a rank's environment with secret values replaced, for display."""
    return {key: REDACTED if key in SECRET_ENV and value else value for key, value in (env or {}).items()}


def engine_env(profile_env=None, communication_env=None, extra_env=None):
    """The container environment: profile, then NCCL/gloo, then the user's extras (last wins).

    Values become strings (Docker wants strings); None drops a key, so a user can unset one.
    """
    merged = {}
    for layer in (profile_env, communication_env, extra_env):
        for key, value in (layer or {}).items():
            if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", str(key)):
                raise ServeArgsError(f"Environment variable name {key!r} is not valid: use letters, digits and '_'.")
            if value is None:
                merged.pop(key, None)
            elif isinstance(value, bool):
                merged[key] = "1" if value else "0"
            else:
                merged[key] = str(value)
    return merged
