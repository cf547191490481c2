"""TEST DOUBLE of a DGX Spark's sysfs fabric tree (ConnectX-7 RoCE), for fabric_check's tests.

Layout and values follow what the recipe checks by hand (show_gids / ibv_devinfo / ip link):
per HCA port 1 a state file and a GID table whose index 3 is the IPv4-mapped RoCE v2 GID
(0-1 link-local v1/v2, 2 IPv4-mapped v1), per interface operstate, speed (Mb/s) and mtu.
"""

import pathlib

LINK_LOCAL = "fe80:0000:0000:0000:0a5c:2cff:fe00:0001"


def mapped(ipv4: str) -> str:
    a, b, c, d = (int(part) for part in ipv4.split("."))
    return f"0000:0000:0000:0000:0000:ffff:{a:02x}{b:02x}:{c:02x}{d:02x}"


def write_spark_fabric(root, hcas=None, interfaces=None):
    """hcas: {name: {"state": ..., "ipv4": ... or None}}; interfaces: {name: {"operstate", "speed", "mtu"}}."""
    root = pathlib.Path(root)
    for name, spec in (hcas or {}).items():
        port = root / "class/infiniband" / name / "ports/1"
        (port / "gids").mkdir(parents=True)
        (port / "gid_attrs/types").mkdir(parents=True)
        (port / "state").write_text(spec.get("state", "4: ACTIVE") + "\n")
        table = [(LINK_LOCAL, "IB/RoCE v1"), (LINK_LOCAL, "RoCE v2")]
        if spec.get("ipv4"):
            table += [(mapped(spec["ipv4"]), "IB/RoCE v1"), (mapped(spec["ipv4"]), spec.get("v2_type", "RoCE v2"))]
        for index in range(16):
            gid, kind = table[index] if index < len(table) else ("0000:0000:0000:0000:0000:0000:0000:0000", "")
            (port / "gids" / str(index)).write_text(gid + "\n")
            (port / "gid_attrs/types" / str(index)).write_text(kind + "\n")
    for name, spec in (interfaces or {}).items():
        net = root / "class/net" / name
        net.mkdir(parents=True)
        (net / "operstate").write_text(spec.get("operstate", "up") + "\n")
        (net / "speed").write_text(str(spec.get("speed", 200000)) + "\n")
        (net / "mtu").write_text(str(spec.get("mtu", 9000)) + "\n")
    return root
