# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""The rehearsal of a first deploy (playbooks/rehearse.yml): what Docker made of each rank, and the table.

A rank's container is created with its whole spec and never started; `docker inspect` of it is what the
GPU, the devices, the ulimits and the mounts became once Docker took them. These functions read that back
into the few facts a person checks, and lay out one row per node. Pure Python, no Ansible imports.
"""

from __future__ import annotations


def rank_summary(container):
    """`docker inspect` of a created rank -> what it would start with (or {"state": "missing"})."""
    if not container:
        return {"state": "missing"}
    host = container.get("HostConfig") or {}
    config = container.get("Config") or {}
    requests = host.get("DeviceRequests") or []
    return {
        "state": (container.get("State") or {}).get("Status", "unknown"),
        "image": container.get("Image", ""),
        "argv": list(container.get("Args") or []),
        "gpus": [
            {"driver": request.get("Driver", ""), "count": request.get("Count"), "capabilities": request.get("Capabilities") or []} for request in requests
        ],
        "devices": [device.get("PathOnHost", "") for device in host.get("Devices") or []],
        "ulimits": [f"{limit['Name']}={limit['Soft']}:{limit['Hard']}" for limit in host.get("Ulimits") or []],
        "shm_size": host.get("ShmSize"),
        "ipc_mode": host.get("IpcMode", ""),
        "network_mode": host.get("NetworkMode", ""),
        "cap_add": list(host.get("CapAdd") or []),
        "binds": list(host.get("Binds") or []),
        "env_names": sorted(entry.split("=", 1)[0] for entry in config.get("Env") or []),
    }


def rank_summaries(read_back, created=()):
    """The rehearsal's two loops over the ranks (each result names its engine_member): Docker's read-back and the
    create -> {node: rank_summary}. A rank Docker refused to create is missing, with Docker's own words."""
    # A refused create has Docker's message and no container (the loop's failed_when keeps the run going).
    refusals = {item.get("engine_member"): item["msg"] for item in created if item.get("msg") and not item.get("container")}
    summaries = {}
    for item in read_back:
        summary = rank_summary(item.get("container"))
        if summary["state"] == "missing" and refusals.get(item.get("engine_member")):
            summary["refusal"] = refusals[item["engine_member"]]
        summaries[item.get("engine_member")] = summary
    return summaries


def _gib(value):
    return f"{value / 1024**3:g} GiB" if isinstance(value, int) and value else "-"


def node_rows(nodes):
    """{node: facts} -> rows of the closing table. facts: rank, driver, driver_owner, nccl, image_id, image_digest,
    rank_container, failures (what a check of this node failed with, its fix in its words). Every node must hold
    the one image the head pulled (the fan-out keeps its ID)."""
    ids = [facts.get("image_id") for facts in nodes.values() if facts.get("image_id")]
    common = max(set(ids), key=ids.count) if ids else ""
    rows = []
    for node, facts in nodes.items():
        rank = facts.get("rank_container") or {"state": "missing"}
        problems = list(facts.get("failures") or [])
        if rank.get("refusal"):
            problems.append(f"Docker refused its rank's container: {rank['refusal'].strip().rstrip('.')}")
        elif rank.get("state") != "created":
            problems.append(f"its rank's container was not created ({rank.get('state')})")
        if not facts.get("image_id"):
            problems.append("it holds no engine image: run the engine_image role (playbooks/artifacts.yml)")
        elif facts["image_id"] != common:
            problems.append(f"its engine image {facts['image_id'][:19]} is not the others' {common[:19]}: run the engine_image role again")
        gpus = "+".join(f"{request['driver'] or 'default'}:{'all' if request['count'] == -1 else request['count']}" for request in rank.get("gpus", []))
        image = (facts.get("image_id") or "-")[:19] + (" @" + facts["image_digest"].split("@")[-1][:19] if facts.get("image_digest") else "")
        rows.append(
            {
                "node": node,
                "rank": str(facts.get("rank", "?")),
                "driver": f"{facts.get('driver') or '-'}" + (f" ({facts['driver_owner']})" if facts.get("driver_owner") else ""),
                "nccl": facts.get("nccl") or "-",
                "image": image,
                "container": ", ".join(
                    part
                    for part in (
                        f"gpus {gpus}" if gpus else "",
                        " ".join(rank.get("devices", [])),
                        " ".join(rank.get("ulimits", [])),
                        f"shm {_gib(rank.get('shm_size'))}",
                    )
                    if part
                ),
                "verdict": "ready" if not problems else "; ".join(problem.strip().rstrip(".") for problem in problems),
            }
        )
    return rows


def table(rows):
    """Rows -> aligned text lines, one per node under a header."""
    columns = ("node", "rank", "driver", "nccl", "image", "container", "verdict")
    widths = {column: max([len(column)] + [len(str(row[column])) for row in rows]) for column in columns}
    lines = ["  ".join(column.ljust(widths[column]) for column in columns).rstrip()]
    lines += ["  ".join(str(row[column]).ljust(widths[column]) for column in columns).rstrip() for row in rows]
    return lines


def node_facts(hostvars, rehearsed):
    """One node's facts for the table, from what this run's roles set on it (hostvars) and its rehearsed rank."""
    name = hostvars.get("inventory_hostname")
    image = hostvars.get("sparkfleet_engine_image") or {}
    images = image.get("images") or [{}]
    build = hostvars.get("nccl_build") or {}
    before = hostvars.get("nvidia_driver_before") or {}
    return {
        "rank": hostvars.get("sparkfleet_rank"),
        "driver": before.get("version") or "",
        "driver_owner": hostvars.get("nvidia_driver_os_owned") or "",
        "nccl": build.get("version") or "",
        "image_id": images[0].get("Id") or "",
        "image_digest": next(iter(images[0].get("RepoDigests") or []), ""),
        "rank_container": (rehearsed or {}).get(name) or {"state": "missing"},
        "failures": list(hostvars.get("rehearsal_failures") or []),
    }
