"""TEST DOUBLE: what a GB10's silicon shows the collection's checks, written as files for one simulated Spark.

The gb10 rehearsal's nodes run the gb10 profile's own checks; a container has neither a GB10's unified memory
nor its ConnectX-7 RoCE ports. The roles read those from files, and the rehearsal's inventory points them
here (preflight_gmu_meminfo_path, preflight_gmu_cgroup_root, preflight_fabric_sysfs_root):
- meminfo: a DGX Spark's /proc/meminfo, idle (tests/data/gpu/gb10, published), MemFree taken as MemAvailable;
- cgroup/: an empty cgroup tree (a Spark's rank is not limited below the machine's memory);
- sys/: the Spark's fabric as sysfs shows it (tests/doubles/sysfs_double.py): both RDMA devices of port 0
  ACTIVE with the node's IPv4-mapped RoCE v2 GID, both interfaces up at 200000 Mb/s and MTU 9000.

Usage: gb10_silicon.py OUTPUT_DIR NODE_IPV4
"""

import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tests/doubles"))

from sysfs_double import write_spark_fabric  # noqa: E402  (the test double beside the unit tests)

HCAS = ("rocep1s0f0", "roceP2p1s0f0")
INTERFACES = ("enp1s0f0np0", "enP2p1s0f0np0")


def main(output, ipv4):
    root = pathlib.Path(output)
    root.mkdir(parents=True, exist_ok=True)
    recorded = dict(line.split(":", 1) for line in (REPO / "tests/data/gpu/gb10/meminfo-partial.txt").read_text().splitlines() if ":" in line)
    recorded = {key.strip(): value.strip() for key, value in recorded.items()}
    recorded.setdefault("MemFree", recorded["MemAvailable"])
    (root / "meminfo").write_text("".join(f"{key}: {value}\n" for key, value in recorded.items()))
    (root / "cgroup").mkdir(exist_ok=True)
    write_spark_fabric(root / "sys", hcas={name: {"ipv4": ipv4} for name in HCAS}, interfaces={name: {} for name in INTERFACES})


if __name__ == "__main__":
    main(*sys.argv[1:3])
