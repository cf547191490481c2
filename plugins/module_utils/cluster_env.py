# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Read the recipe's `cluster.env` (a sourced shell file) without running it.

The file is parsed as data: KEY=value lines, optional `export`, single or
double quotes, comments and blank lines. Anything a shell would execute or
expand (command substitution, backticks, variables, redirections, command
lists) is refused with the line number and the fix; nothing is ever run.
Pure Python, no Ansible imports: the inventory plugin and the tests use it.
"""

from __future__ import annotations

import ipaddress
import re

_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HOSTNAME = re.compile(r"^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")
# Characters that make an unquoted shell word do something other than be text.
_UNQUOTED_SHELL = set(";&|<>()`$\\*?[]{}!~")

# The recipe's defaults for optional keys (recipe.md, "Cluster description").
DEFAULTS = {
    "SSH_USER": "nvidia",
    "NCCL_IB_HCA": "rocep1s0f0,roceP2p1s0f0",
    "NCCL_SOCKET_IFNAME": "enp1s0f0np0,enP2p1s0f0np0",
    "WEIGHTS": "/var/tmp/models/glm53-flash-fp8",
    "CACHE": "/var/tmp/models/glm53-cache",
    "IMAGE": "glm53-flash:sm121-v8",
    "NAME": "vllm_glm53",
    "PORT": "8000",
    "MASTER_PORT": "29500",
    "HF_REPO": "dealignai/GLM-5.3-Flash-UNCENSORED-FP8",
    "HF_BASE_IMAGE": "vllm/vllm-openai:glm53-flash-arm64-cu130",
}

# cluster.env key -> (collection variable, converter). GLM53_* are the recipe's overrides.
_LIST = "list"
_INT = "int"
_FLOAT = "float"
_STR = "str"
KNOWN_KEYS = {
    "SSH_USER": ("ansible_user", _STR),
    "NCCL_IB_HCA": ("fabric_hcas", _LIST),
    "NCCL_SOCKET_IFNAME": ("fabric_interfaces", _LIST),
    "GLOO_SOCKET_IFNAME": ("gloo_socket_ifname", _STR),
    "WEIGHTS": ("engine_weights_dir", _STR),
    "CACHE": ("engine_cache_dir", _STR),
    "IMAGE": ("engine_image", _STR),
    "NAME": ("engine_container_name", _STR),
    "PORT": ("engine_port", _INT),
    "MASTER_PORT": ("engine_master_port", _INT),
    "HF_REPO": ("model_repo", _STR),
    "HF_BASE_IMAGE": ("engine_image_base", _STR),
    "TP": ("engine_tensor_parallel_size", _INT),
    "GLM53_LANE": ("lane", _STR),
    "GLM53_GMU": ("engine_gpu_memory_utilization", _FLOAT),
    "GLM53_MTP_K": ("engine_mtp_num_speculative_tokens", _INT),
    "GLM53_BATCHED": ("engine_max_num_batched_tokens", _INT),
    "GLM53_SERVED_NAME": ("engine_served_model_name", _STR),
    "GLM53_IMAGE": ("engine_image", _STR),
    "GLM53_PORT": ("engine_port", _INT),
    "GLM53_TP": ("engine_tensor_parallel_size", _INT),
}
# The recipe's lane knobs that are not a lane's name: they override the chosen lane's numbers.
LANE_OVERRIDE_KEYS = {"GLM53_MAXLEN": "max_model_len", "GLM53_SEQS": "max_num_seqs"}
# As in the recipe's scripts, a GLM53_* variable in the environment wins over the file.
ENVIRONMENT_PREFIX = "GLM53_"
ADDRESS_KEYS = ("HEAD_IP", "WORKER_IPS")


class ClusterEnvError(ValueError):
    """A cluster.env that cannot be read as data; the message names the line and the fix."""


def _scan_value(raw, lineno, key):
    """Turn the text after KEY= into its value, refusing anything a shell would run or expand."""
    value, index, length = [], 0, len(raw)
    while index < length:
        char = raw[index]
        if char in " \t":
            rest = raw[index:].strip()
            if rest and not rest.startswith("#"):
                raise ClusterEnvError(
                    f'line {lineno}: {key}= is followed by more words ({rest!r}); a shell would run them as a command. Quote the value: {key}="{raw.strip()}"'
                )
            break
        if char == "'":
            end = raw.find("'", index + 1)
            if end < 0:
                raise ClusterEnvError(f"line {lineno}: unterminated single quote in {key}=; close it with ' on the same line.")
            value.append(raw[index + 1 : end])
            index = end + 1
            continue
        if char == '"':
            end = index + 1
            while end < length and raw[end] != '"':
                if raw[end] in "$`\\":
                    raise ClusterEnvError(
                        f"line {lineno}: {key} contains {raw[end]!r} inside double quotes, which a shell would expand or run "
                        f"(command substitution, variables, escapes). Write the value literally; nothing here is ever executed."
                    )
                end += 1
            if end >= length:
                raise ClusterEnvError(f'line {lineno}: unterminated double quote in {key}=; close it with " on the same line.')
            value.append(raw[index + 1 : end])
            index = end + 1
            continue
        if char in _UNQUOTED_SHELL:
            raise ClusterEnvError(
                f"line {lineno}: {key} contains {char!r}, a shell construct (command substitution, variables, globs, "
                f"redirections or command lists); cluster.env is read as data and never run. Write the value literally."
            )
        value.append(char)
        index += 1
    return "".join(value)


def parse(text):
    """Parse cluster.env text into an ordered {KEY: value} dict (no defaults applied)."""
    entries = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("export "):
            stripped = stripped[len("export ") :].lstrip()
        key, sep, raw = stripped.partition("=")
        if not sep or not _KEY.match(key):
            raise ClusterEnvError(
                f"line {lineno}: {stripped[:60]!r} is not KEY=value; cluster.env holds assignments only "
                f"(no commands, functions or conditionals). Remove the line or make it an assignment."
            )
        if raw.endswith("\\"):
            raise ClusterEnvError(f"line {lineno}: {key} continues on the next line with '\\'; put the whole value on one line.")
        if key in entries:
            raise ClusterEnvError(f"line {lineno}: {key} is set twice; keep one assignment.")
        entries[key] = _scan_value(raw, lineno, key)
    return entries


def _check_address(address, key):
    try:
        ipaddress.ip_address(address)
        return
    except ValueError:
        pass
    if not _HOSTNAME.match(address) or address.replace(".", "").isdigit():
        raise ClusterEnvError(f"{key}: {address!r} is neither an IP address nor a hostname; use the node's fabric IP (for example 192.168.100.12).")


def _convert(key, value, kind):
    if kind == _LIST:
        items = [item.strip() for item in value.split(",") if item.strip()]
        if not items:
            raise ClusterEnvError(f"{key} is empty; give one device or interface, or several separated by commas.")
        return items
    if kind in (_INT, _FLOAT):
        try:
            number = int(value) if kind == _INT else float(value)
        except ValueError:
            raise ClusterEnvError(f"{key}={value!r} must be a {'whole number' if kind == _INT else 'number'}.") from None
        if number <= 0:
            raise ClusterEnvError(f"{key}={value!r} must be positive.")
        return number
    return value


def cluster(entries, host_prefix="spark", environ=None):
    """Turn parsed entries into hosts (head first), group variables and unknown keys.

    environ: the environment of the run; its GLM53_* variables win over the
    file's, as in the recipe's scripts (`: "${GLM53_LANE:=...}"`).
    Returns {"hosts": [(name, address)], "vars": {...}, "unknown": [KEY, ...],
    "from_environment": {KEY: value}}.
    """
    from_environment = {key: value for key, value in (environ or {}).items() if key.startswith(ENVIRONMENT_PREFIX)}
    entries = {**entries, **from_environment}
    for key in ADDRESS_KEYS:
        if not entries.get(key, "").strip():
            raise ClusterEnvError(
                f"{key} is missing or empty: cluster.env needs HEAD_IP=<head fabric IP> and "
                f'WORKER_IPS="<worker IP> <worker IP> ..." (WORKER_IPS may be "" for a single node only if you mean it: use one address per node).'
            )
    addresses = [entries["HEAD_IP"].strip(), *entries["WORKER_IPS"].split()]
    for index, address in enumerate(addresses):
        _check_address(address, "HEAD_IP" if index == 0 else "WORKER_IPS")
    seen = {}
    for address in addresses:
        if address in seen:
            raise ClusterEnvError(f"address {address} appears twice in HEAD_IP/WORKER_IPS; every node needs its own address.")
        seen[address] = True

    merged = dict(DEFAULTS)
    merged.update(entries)
    variables = {}
    for key, (name, kind) in KNOWN_KEYS.items():
        if key in merged:
            variables[name] = _convert(key, merged[key], kind)
    if "gloo_socket_ifname" not in variables:
        variables["gloo_socket_ifname"] = variables["fabric_interfaces"][0]
    nodes = len(addresses)
    tensor_parallel = variables.get("engine_tensor_parallel_size")
    if tensor_parallel is not None and tensor_parallel % nodes:
        raise ClusterEnvError(
            f"{nodes} nodes do not divide tensor-parallel size {tensor_parallel}: every Spark holds one rank per GPU. "
            f"List {tensor_parallel} nodes in HEAD_IP/WORKER_IPS, or drop TP (it defaults to the number of nodes)."
        )
    hosts = [(f"{host_prefix}{index + 1}", address) for index, address in enumerate(addresses)]
    variables["engine_head"] = hosts[0][0]
    overrides = {}
    for key, name in LANE_OVERRIDE_KEYS.items():
        if entries.get(key, "").strip():
            overrides[name] = _convert(key, entries[key], _INT)
    if overrides:
        variables["lane_overrides"] = overrides
    unknown = [key for key in entries if key not in KNOWN_KEYS and key not in ADDRESS_KEYS and key not in LANE_OVERRIDE_KEYS]
    for key in unknown:
        variables[key] = entries[key]
    return {"hosts": hosts, "vars": variables, "unknown": unknown, "from_environment": from_environment}
