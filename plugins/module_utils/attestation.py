# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Rank parity: what each rank of one engine will run, and where two ranks differ.

Ranks that differ silently hang or corrupt an engine: another image under the same tag, a flag
that one headless rank lacks, another NCCL or patch. Each rank's attestation holds what it will
run, with what must differ between ranks (its place, its address, its own KV sizing) taken out;
`parity_differences` names every item that differs, with each rank's value.
"""

from __future__ import annotations

import hashlib
import json

from ansible_collections.sparkfleet.vllm.plugins.module_utils.serve_args import argv_lines

# Flags that differ between ranks by design: the rank's place, and each node's KV memory, which
# the kv_cache_from_gmu profiles size from that node's memory (vLLM takes the smallest across ranks).
RANK_FLAGS_WITH_VALUE = {"--node-rank", "--kv-cache-memory-bytes"}
RANK_FLAGS = {"--headless"}
# Variables that name the node itself: its fabric address and interfaces, and the head's API key.
RANK_ENV = {"VLLM_HOST_IP", "VLLM_API_KEY", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA"}

# The items of an attestation, in the order a refusal names them, with what each one is.
ITEMS = {
    "image_id": "engine image ID",
    "argv": "vLLM flags (rank's place and KV size aside)",
    "env": "environment (node address, interfaces and API key aside)",
    "patches": "sha256 of the patched files mounted over vLLM's",
    "weights_manifest": "sha256 of the weights' manifest (every weight file's size and sha256)",
    "host_nccl": "sha256 of the host NCCL the ranks load",
    "kernel": "kernel",
    "driver": "NVIDIA driver version",
}


# What to do about each, named once per refusal.
FIXES = {
    "image_id": "put the head's image on every node (playbooks/artifacts.yml --tags image)",
    "argv": "give every node the same engine settings (a host_vars entry on one node, e.g. engine_extra_args, makes a rank differ)",
    "env": "give every node the same environment (engine_extra_env, nccl_environment)",
    "patches": "make every node's patched files the same (run again: the engine role prepares them from the image)",
    "weights_manifest": "give every node the head's weights (playbooks/artifacts.yml --tags weights checks and repairs them)",
    "host_nccl": "install the same NCCL on every node (the nccl role)",
    "kernel": "run the same kernel on every node (update, then reboot the odd one)",
    "driver": "load the same NVIDIA driver on every node (the nvidia_driver role, nvidia_driver_version, then a reboot of the odd one)",
}


# What carries the ranks' collective traffic: the image (its NCCL or gloo), the variables that steer
# the fabric, and the engine's shape. An engine whose ranks all ran with the same identity, and that
# streams a token now, has all-reduced across that very fabric for it (engine role: the all-reduce
# check is then not run again before a relaunch that keeps the identity, e.g. a lane switch).
FABRIC_ENV_PREFIXES = ("NCCL_", "GLOO_", "UCX_")
FABRIC_ENV = {"VLLM_HOST_IP", "MASTER_ADDR", "MASTER_PORT", "CUDA_VISIBLE_DEVICES"}
TOPOLOGY_FLAGS = {
    "--tensor-parallel-size": "--tensor-parallel-size",
    "-tp": "--tensor-parallel-size",
    "--pipeline-parallel-size": "--pipeline-parallel-size",
    "-pp": "--pipeline-parallel-size",
    "--data-parallel-size": "--data-parallel-size",
    "-dp": "--data-parallel-size",
    "--nnodes": "--nnodes",
    "--node-rank": "--node-rank",
    "--master-addr": "--master-addr",
    "--master-port": "--master-port",
    "--distributed-executor-backend": "--distributed-executor-backend",
}


class AttestationError(ValueError):
    """An attestation that cannot be built from what the rank reported."""


def shared_argv(argv):
    """argv without the flags that differ between ranks by design."""
    words, shared, skip = [str(word) for word in argv or []], [], False
    for word in words:
        if skip:
            skip = False
            continue
        if word in RANK_FLAGS_WITH_VALUE:
            skip = True
            continue
        if word in RANK_FLAGS:
            continue
        shared.append(word)
    return shared


def shared_env(env):
    """The environment without the variables that name the node itself."""
    if not isinstance(env, dict):
        raise AttestationError(f"a rank's environment must be a mapping, not {type(env).__name__}")
    return {key: str(value) for key, value in sorted(env.items()) if key not in RANK_ENV}


def _sha(value):
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def rank_attestation(rank):
    """What one rank will run: {image_id, argv, env, patches, host_nccl, kernel, driver} and their hashes.

    `rank` is what the engine role rendered and read for it: image_id, argv, env, patches (sha256 of
    each patched file, in mount order), weights_manifest (sha256 of the weights' manifest, "missing"
    where a node has none, "" without weights), host_nccl (sha256 or ""), kernel, driver (the loaded
    NVIDIA driver's version, "" where none was read), repo_digests (the image's registry digests).
    The repo digests are recorded, not compared: the same image ID has one on a node that pulled it
    and none on a node it was loaded onto (docker load), and the image ID is what runs. The image's own
    NCCL follows from its ID (the nccl role checks it per image ID against the pin). The entrypoint
    wrapper is not attested: every rank gets the same file from the controller, and the fingerprint holds it.
    """
    if not rank.get("image_id"):
        raise AttestationError("a rank's attestation needs its image_id")
    argv, env = shared_argv(rank.get("argv")), shared_env(rank.get("env") or {})
    return {
        "image_id": str(rank["image_id"]),
        "argv": argv,
        "argv_sha256": _sha(argv),
        "env": env,
        "env_sha256": _sha(env),
        "patches": [str(checksum) for checksum in rank.get("patches") or []],
        "weights_manifest": str(rank.get("weights_manifest") or ""),
        "host_nccl": str(rank.get("host_nccl") or ""),
        "kernel": str(rank.get("kernel") or ""),
        "driver": str(rank.get("driver") or ""),
        "repo_digests": sorted(str(digest) for digest in rank.get("repo_digests") or []),
    }


def _describe(item, value, other):
    """A short, readable form of one rank's value: for argv and env, what it has that the other lacks."""
    if item == "argv":
        theirs = argv_lines(other)
        mine = [line for line in argv_lines(value) if line not in theirs]
        return ", ".join(mine) if mine else "(nothing the other lacks)"
    if item == "env":
        mine = {key: val for key, val in value.items() if other.get(key) != val}
        return ", ".join(f"{key}={val}" for key, val in mine.items()) or "(nothing the other lacks)"
    return value if value not in ("", []) else "(none)"


def parity_differences(attestations, reference=None):
    """Every item on which a rank differs from the reference rank (the head: the first one given).

    attestations: {node: rank_attestation(...)} in rank order. Returns a list of
    {node, item, what, value, reference_node, reference_value}; empty when every rank agrees.
    """
    nodes = list(attestations)
    if not nodes:
        return []
    reference = reference or nodes[0]
    if reference not in attestations:
        raise AttestationError(f"reference rank {reference!r} is not among {nodes}")
    wanted = attestations[reference]
    differences = []
    for node in nodes:
        if node == reference:
            continue
        mine = attestations[node]
        for item, what in ITEMS.items():
            if mine.get(item) == wanted.get(item):
                continue
            differences.append(
                {
                    "node": node,
                    "item": item,
                    "what": what,
                    "value": _describe(item, mine.get(item), wanted.get(item)),
                    "reference_node": reference,
                    "reference_value": _describe(item, wanted.get(item), mine.get(item)),
                }
            )
    return differences


def parity_message(differences, engine):
    """One refusal naming every rank, item and both values."""
    lines = [
        f"{difference['node']}: {difference['what']}: {difference['value']} where {difference['reference_node']} (the head) has {difference['reference_value']}"
        for difference in differences
    ]
    fixes = [FIXES[item] for item in dict.fromkeys(difference["item"] for difference in differences) if item in FIXES]
    return f"The ranks of engine '{engine}' would run different things: " + "; ".join(lines) + ". To fix: " + "; ".join(fixes) + "."


def parity_refusal(attestations, engine):
    """The refusal naming every rank, item and both values where the ranks differ; empty when every rank agrees."""
    differences = parity_differences(attestations)
    return parity_message(differences, engine) if differences else ""


def _digest_of(repo_digests):
    """The head image's registry digest, short, or why there is none."""
    if not repo_digests:
        return "none (loaded, not pulled)"
    return repo_digests[0].rpartition("@")[2][:19]


def attestation_summary(record):
    """One line for status.yml from a launch's record (attestation.json on the head)."""
    ranks = record.get("ranks") or {}
    if not ranks:
        return "rank attestation: empty record"
    head = next(iter(ranks.values()))
    differences = parity_differences(ranks)
    verdict = "every rank the same" if not differences else f"{len(differences)} difference(s): " + parity_message(differences, record.get("engine", "?"))
    return (
        f"rank attestation at {record.get('attested_at', '?')} (lane {record.get('lane', '?')}): {len(ranks)} ranks, image {head.get('image_id', '?')[:19]}, "
        f"argv {head.get('argv_sha256', '?')[:12]}, env {head.get('env_sha256', '?')[:12]}, {len(head.get('patches') or [])} patched file(s), "
        f"weights manifest {(head.get('weights_manifest') or '-')[:12]}, "
        f"kernel {head.get('kernel') or '?'}, driver {head.get('driver') or '-'}, "
        f"repo digest {_digest_of(head.get('repo_digests'))}: {verdict}"
    )


def launch_provenance(record, image_nccl=None):
    """The report header's lines about what ran beyond attestation_summary: each patched file's and the NCCL's bytes.

    `record`: the launch's record (attestation.json on the head). `image_nccl`: the nccl role's probe of the head's
    image (its per-image-ID record: torch_nccl, packages, library {path, sha256}), or None where none was found.
    Returns {"patched files": ..., "NCCL": ...}, each one line.
    """
    ranks = record.get("ranks") or {}
    head = next(iter(ranks.values()), {})
    patches = head.get("patches") or []
    patched = ", ".join(f"sha256 {checksum[:12]}" for checksum in patches) if patches else "none"
    if head.get("host_nccl"):
        nccl = f"the host's, mounted into every rank: sha256 {head['host_nccl'][:12]}"
    elif image_nccl is None:
        nccl = f"the image's, not probed on the head (no record of the nccl role for image {str(head.get('image_id', '?'))[:19]})"
    else:
        library = image_nccl.get("library") or {}
        version = image_nccl.get("torch_nccl") or "none (no CUDA torch)"
        file_part = f", {library['path']} sha256 {library['sha256'][:12]}" if library.get("path") else ", no library file"
        nccl = f"the image's: torch's NCCL {version}{file_part}"
    return {"patched files": f"{len(patches)}: {patched}" if patches else "none", "NCCL": nccl}


def fabric_identity(rank):
    """What of one rank carries collective traffic: {image_id, env, topology}.

    `rank`: {image_id, argv, env} as rendered for it. env keeps the fabric's variables (NCCL_*,
    GLOO_*, UCX_*, the node's address, its visible devices); topology keeps the flags that shape the
    engine (parallel sizes, node count and rank, master address and port, executor backend), in
    their long names, `--flag=value` read like `--flag value`. Everything else (lane, memory, batch
    size) can change without changing the fabric.
    """
    if not rank.get("image_id"):
        raise AttestationError("a rank's fabric identity needs its image_id")
    env = rank.get("env") or {}
    if not isinstance(env, dict):
        raise AttestationError(f"a rank's environment must be a mapping, not {type(env).__name__}")
    words, topology = [str(word) for word in rank.get("argv") or []], {}
    for index, word in enumerate(words):
        flag, equals, value = word.partition("=")
        if flag not in TOPOLOGY_FLAGS:
            continue
        if not equals:
            value = words[index + 1] if index + 1 < len(words) and not words[index + 1].startswith("-") else ""
        topology[TOPOLOGY_FLAGS[flag]] = value
    return {
        "image_id": str(rank["image_id"]),
        "env": {key: str(value) for key, value in sorted(env.items()) if key.startswith(FABRIC_ENV_PREFIXES) or key in FABRIC_ENV},
        "topology": dict(sorted(topology.items())),
    }
