#!/usr/bin/python
# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Ansible module: the recipe's fabric preflight on one node, from sysfs."""

from __future__ import annotations

DOCUMENTATION = r"""
module: fabric_check
short_description: Check a node's RDMA fabric before an NCCL engine starts
version_added: 0.1.0
description:
  - Reads sysfs only. For each HCA, the port state (must be ACTIVE) and the first IPv4-mapped RoCE v2 GID
    in indices 0-15 (the index C(NCCL_IB_GID_INDEX=auto) picks); for each fabric interface, its operstate,
    link speed and MTU (the recipe - 200000 Mb/s and MTU 9000 on a Spark).
  - Fails (unless I(report_only)) listing every problem with the device, the value read and the fix.
  - Supports check mode; changes nothing.
options:
  hcas:
    description: RDMA devices (C(fabric_hcas)), e.g. rocep1s0f0.
    type: list
    elements: str
    default: []
  interfaces:
    description: Fabric network interfaces (C(fabric_interfaces)).
    type: list
    elements: str
    default: []
  port:
    description: HCA port.
    type: int
    default: 1
  min_speed_mbps:
    description: Lowest acceptable link speed of a fabric interface, in Mb/s.
    type: int
    default: 200000
  min_mtu:
    description: Lowest acceptable MTU of a fabric interface.
    type: int
    default: 9000
  require_roce_gid:
    description: Require an IPv4-mapped RoCE v2 GID on every HCA.
    type: bool
    default: true
  sysfs_root:
    description: Where sysfs is (tests point it at a recorded tree).
    type: path
    default: /sys
  report_only:
    description: Return the findings without failing.
    type: bool
    default: false
extends_documentation_fragment:
  - sparkfleet.vllm.attributes
  - sparkfleet.vllm.attributes.READ_ONLY
author:
  - sparkfleet developers (@sparkfleet)
"""

EXAMPLES = r"""
- name: Check the fabric of every node
  sparkfleet.vllm.fabric_check:
    hcas: "{{ fabric_hcas }}"
    interfaces: "{{ fabric_interfaces }}"
"""

RETURN = r"""
hcas:
  description: Per HCA - present, state, gid_index, gid and the IPv4 address in it.
  returned: always
  type: list
  elements: dict
  sample: [{"hca": "rocep1s0f0", "port": 1, "state": "4: ACTIVE", "gid_index": 3, "gid": "0000:0000:0000:0000:0000:ffff:c0a8:640b", "ipv4": "192.168.100.11"}]
interfaces:
  description: Per interface - present, operstate, speed_mbps, mtu.
  returned: always
  type: list
  elements: dict
  sample: [{"interface": "enp1s0f0np0", "operstate": "up", "speed_mbps": 200000, "mtu": 9000}]
problems:
  description: What is wrong, each naming the device, the value and the fix.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkfleet.vllm.plugins.module_utils import fabric


def main():
    module = AnsibleModule(
        argument_spec={
            "hcas": {"type": "list", "elements": "str", "default": []},
            "interfaces": {"type": "list", "elements": "str", "default": []},
            "port": {"type": "int", "default": 1},
            "min_speed_mbps": {"type": "int", "default": 200000},
            "min_mtu": {"type": "int", "default": 9000},
            "require_roce_gid": {"type": "bool", "default": True},
            "sysfs_root": {"type": "path", "default": "/sys"},
            "report_only": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    params = module.params
    hcas = [fabric.read_hca(params["sysfs_root"], name, params["port"]) for name in params["hcas"]]
    interfaces = [fabric.read_interface(params["sysfs_root"], name) for name in params["interfaces"]]
    found = fabric.problems(hcas, interfaces, params["min_speed_mbps"], params["min_mtu"], params["require_roce_gid"])
    result = {"changed": False, "hcas": hcas, "interfaces": interfaces, "problems": found}
    if found and not params["report_only"]:
        module.fail_json(msg=f"The fabric is not ready: {'; '.join(found)}", **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
