"""fabric_check on a sysfs tree written by tests/doubles/sysfs_double.py (a TEST DOUBLE of a Spark's)."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import fabric

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests/doubles"))
from sysfs_double import write_spark_fabric  # noqa: E402

HEALTHY_HCAS = {"rocep1s0f0": {"ipv4": "192.168.100.11"}, "roceP2p1s0f0": {"ipv4": "192.168.101.11"}}
HEALTHY_IFS = {"enp1s0f0np0": {}, "enP2p1s0f0np0": {}}


def run_module(root, **args):
    params = {"sysfs_root": str(root), "hcas": list(HEALTHY_HCAS), "interfaces": list(HEALTHY_IFS), **args}
    args_file = pathlib.Path(root) / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": params}))
    env = dict(os.environ, PYTHONPATH=str(REPO / "collections"))
    out = subprocess.run([sys.executable, str(REPO / "plugins/modules/fabric_check.py"), str(args_file)], capture_output=True, text=True, env=env, check=False)
    return json.loads(out.stdout)


def test_healthy_spark_fabric(tmp_path):
    write_spark_fabric(tmp_path, HEALTHY_HCAS, HEALTHY_IFS)
    out = run_module(tmp_path)
    assert out.get("failed") is not True, out
    assert out["problems"] == []
    first = out["hcas"][0]
    # The first RoCE v2 GID that is IPv4-mapped is index 3 (what NCCL_IB_GID_INDEX=auto picks).
    assert (first["gid_index"], first["ipv4"]) == (3, "192.168.100.11")
    assert out["interfaces"][0] == {"interface": "enp1s0f0np0", "present": True, "operstate": "up", "speed_mbps": 200000, "mtu": 9000}


@pytest.mark.parametrize(
    ("hcas", "interfaces", "message"),
    [
        ({"rocep1s0f0": {"state": "1: DOWN", "ipv4": "192.168.100.11"}}, {}, "HCA rocep1s0f0 port 1 is '1: DOWN', not ACTIVE"),
        ({"rocep1s0f0": {}}, {}, "HCA rocep1s0f0 port 1 has no IPv4-mapped RoCE v2 GID"),
        ({"rocep1s0f0": {"ipv4": "192.168.100.11", "v2_type": "IB/RoCE v1"}}, {}, "has no IPv4-mapped RoCE v2 GID"),
        ({}, {"enp1s0f0np0": {"mtu": 1500}}, "interface enp1s0f0np0 has MTU 1500, below 9000: ip link set enp1s0f0np0 mtu 9000"),
        ({}, {"enp1s0f0np0": {"speed": 100000}}, "interface enp1s0f0np0 links at 100000 Mb/s, below 200000"),
        ({}, {"enp1s0f0np0": {"operstate": "down", "speed": -1}}, "interface enp1s0f0np0 is 'down', not up"),
    ],
)
def test_each_problem_names_device_value_and_fix(tmp_path, hcas, interfaces, message):
    write_spark_fabric(tmp_path, hcas, interfaces)
    out = run_module(tmp_path, hcas=list(hcas), interfaces=list(interfaces))
    assert out["failed"] is True
    assert message in out["msg"]


def test_missing_devices_point_at_the_inventory(tmp_path):
    write_spark_fabric(tmp_path, {}, {})
    out = run_module(tmp_path, hcas=["mlx5_9"], interfaces=["eth7"], report_only=True)
    assert out.get("failed") is not True
    assert out["problems"] == [
        "HCA mlx5_9 port 1 does not exist (no mlx5_9 under /sys/class/infiniband): fix fabric_hcas (ibv_devices lists them)",
        "interface eth7 does not exist: fix fabric_interfaces (ip -br link lists them)",
    ]


def test_ipv4_is_decoded_from_the_gid():
    assert fabric.ipv4_from_gid("0000:0000:0000:0000:0000:ffff:c0a8:640b") == "192.168.100.11"
