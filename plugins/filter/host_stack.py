# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Filters of the host stack: the cluster's driver plan and NCCL's pin."""

from __future__ import annotations

DOCUMENTATION = r"""
name: driver_plan
short_description: Decide which nodes get the pinned NVIDIA driver
version_added: 0.3.0
description:
  - Takes every node's loaded driver (null where none answers) and returns
    C({install - {node - reason}, version - the version installed there, problems - [message]}); see module_utils/nvidia_driver.py.
  - The same file provides C(apt_simulation), C(nccl_problems), C(nccl_other_version_report) and C(nccl_conf)
    (module_utils/nccl_pin.py), and
    C(driver_versions_offered) (every node's C(apt-cache madison) output to the versions all of them offer).
positional: loaded
options:
  loaded:
    description: Node name to loaded driver version (or null).
    type: dict
    required: true
  minimum:
    description: The lowest acceptable driver version.
    type: str
    required: true
  target:
    description: The pinned version installed where a node needs a driver.
    type: str
    required: true
  installs_allowed:
    description: Whether the role may install; when not, nodes that need a driver are problems.
    type: bool
    default: true
  available:
    description:
      - The driver versions the repository offers on every node (see C(driver_versions_offered)); null when unknown.
        A cluster whose newest driver is above I(target) converges up to it only where it is offered.
    type: list
    elements: str
  allow_downgrade:
    description: Bring every node to I(target), downgrading newer ones (and rebooting them). Off, no node is downgraded.
    type: bool
    default: false
"""

EXAMPLES = r"""
plan: "{{ {'spark1': '580.95.05', 'spark2': None} | sparkfleet.vllm.driver_plan('580.95', '580.95.05') }}"
"""

RETURN = r"""
_value:
  description: The plan.
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.vllm.plugins.module_utils import nccl_pin, nvidia_driver


def driver_plan(loaded, minimum, target, installs_allowed=True, available=None, allow_downgrade=False):
    try:
        return nvidia_driver.plan(loaded, minimum, target, installs_allowed, available=available, allow_downgrade=allow_downgrade)
    except nvidia_driver.DriverPolicyError as error:
        raise AnsibleFilterError(str(error)) from error


def nccl_conf(settings):
    try:
        return nccl_pin.nccl_conf(settings)
    except ValueError as error:
        raise AnsibleFilterError(str(error)) from error


class FilterModule:
    """sparkfleet.vllm host-stack filters."""

    def filters(self):
        return {
            "driver_plan": driver_plan,
            "apt_simulation": nccl_pin.parse_apt_simulation,
            "nccl_problems": nccl_pin.problems,
            "nccl_other_version_report": nccl_pin.other_version_report,
            "nccl_conf": nccl_conf,
            "upstream_version": nvidia_driver.upstream_version,
            "driver_versions_offered": nvidia_driver.available_versions,
        }
