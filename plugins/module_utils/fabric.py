# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""The recipe's fabric preflight, read from sysfs: RDMA ports active, an IPv4-mapped RoCE v2 GID on
each HCA (the index NCCL_IB_GID_INDEX=auto picks), link speed and MTU of each fabric interface.

Every read goes through `root` (/sys on a node), so tests feed a recorded tree. Pure Python.
"""

from __future__ import annotations

import os

IPV4_MAPPED_PREFIX = "0000:0000:0000:0000:0000:ffff:"
GID_INDICES = range(16)  # the recipe scans 0-15


def _read(root: str, *parts: str) -> str | None:
    try:
        with open(os.path.join(root, *parts), encoding="ascii", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return None


def ipv4_from_gid(gid: str) -> str:
    tail = gid[len(IPV4_MAPPED_PREFIX) :].replace(":", "")
    return ".".join(str(int(tail[i : i + 2], 16)) for i in range(0, 8, 2))


def read_hca(root: str, hca: str, port: int = 1) -> dict:
    """State of an HCA port and its first IPv4-mapped RoCE v2 GID."""
    port_dir = ("class", "infiniband", hca, "ports", str(port))
    state = _read(root, *port_dir, "state")
    found = {"hca": hca, "port": port, "present": state is not None, "state": state, "gid_index": None, "gid": None, "ipv4": None}
    for index in GID_INDICES:
        kind = _read(root, *port_dir, "gid_attrs", "types", str(index))
        gid = _read(root, *port_dir, "gids", str(index))
        if kind == "RoCE v2" and gid and gid.startswith(IPV4_MAPPED_PREFIX):
            found.update(gid_index=index, gid=gid, ipv4=ipv4_from_gid(gid))
            break
    return found


def read_interface(root: str, name: str) -> dict:
    speed = _read(root, "class", "net", name, "speed")
    mtu = _read(root, "class", "net", name, "mtu")
    return {
        "interface": name,
        "present": _read(root, "class", "net", name, "operstate") is not None,
        "operstate": _read(root, "class", "net", name, "operstate"),
        # speed reads -1 (or fails) when the link is down
        "speed_mbps": int(speed) if speed and speed.lstrip("-").isdigit() else None,
        "mtu": int(mtu) if mtu and mtu.isdigit() else None,
    }


def problems(hcas: list[dict], interfaces: list[dict], min_speed_mbps: int, min_mtu: int, require_gid: bool) -> list[str]:
    """What is wrong, each naming the device, the value read and the fix."""
    found = []
    for hca in hcas:
        name = f"HCA {hca['hca']} port {hca['port']}"
        if not hca["present"]:
            found.append(f"{name} does not exist (no {hca['hca']} under /sys/class/infiniband): fix fabric_hcas (ibv_devices lists them)")
            continue
        if not (hca["state"] or "").endswith("ACTIVE"):
            found.append(f"{name} is {hca['state']!r}, not ACTIVE: check the cable and the peer (ibv_devinfo)")
        if require_gid and hca["gid_index"] is None:
            found.append(f"{name} has no IPv4-mapped RoCE v2 GID in indices 0-15: give the fabric interface its IPv4 address (show_gids)")
    for interface in interfaces:
        name = f"interface {interface['interface']}"
        if not interface["present"]:
            found.append(f"{name} does not exist: fix fabric_interfaces (ip -br link lists them)")
            continue
        if interface["operstate"] != "up":
            found.append(f"{name} is {interface['operstate']!r}, not up: ip link set {interface['interface']} up, and check the cable")
        if interface["speed_mbps"] is None or interface["speed_mbps"] < min_speed_mbps:
            found.append(
                f"{name} links at {interface['speed_mbps']} Mb/s, below {min_speed_mbps}: check the cable and the port (ethtool {interface['interface']})"
            )
        if interface["mtu"] is None or interface["mtu"] < min_mtu:
            found.append(f"{name} has MTU {interface['mtu']}, below {min_mtu}: ip link set {interface['interface']} mtu {min_mtu} (and persist it in netplan)")
    return found
