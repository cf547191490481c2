#!/usr/bin/python
# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Ansible module: which NVIDIA driver a node runs, as nvidia-smi reports it."""

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_driver_info
short_description: Read the NVIDIA driver a node has loaded, from nvidia-smi
version_added: 0.1.0
description:
  - Runs C(nvidia-smi) (the default table, which every driver prints) and returns the loaded driver and
    CUDA versions and the GPUs. On a GB10 the memory fields read C(Not Supported) and are returned as
    null, never as zero.
  - Never fails because no driver answers; it says so in I(state) (C(absent) - no nvidia-smi,
    C(not_loaded) - nvidia-smi runs but no driver answers, e.g. installed but not yet rebooted).
    The nvidia_driver role decides what that means for the cluster.
  - Changes nothing; supports check mode.
options:
  nvidia_smi:
    description: The nvidia-smi command (a name on PATH or a path).
    type: str
    default: nvidia-smi
extends_documentation_fragment:
  - sparkfleet.vllm.attributes
  - sparkfleet.vllm.attributes.READ_ONLY
author:
  - sparkfleet developers (@sparkfleet)
"""

EXAMPLES = r"""
- name: Read the loaded driver
  sparkfleet.vllm.gpu_driver_info:
  register: driver

- name: Show it
  ansible.builtin.debug:
    msg: "{{ driver.state }} {{ driver.version }}"
"""

RETURN = r"""
state:
  description: C(loaded), C(not_loaded) or C(absent).
  returned: always
  type: str
  sample: loaded
version:
  description: The loaded driver version, or null when none answers.
  returned: always
  type: str
  sample: 580.95.05
cuda_version:
  description: The CUDA version the driver supports, or null.
  returned: always
  type: str
  sample: "13.0"
gpus:
  description: GPUs (index, name, memory_used, memory_total in bytes or null when not reported).
  returned: always
  type: list
  elements: dict
  sample: [{"index": 0, "name": "NVIDIA GB10", "memory_used": null, "memory_total": null}]
detail:
  description: What nvidia-smi said when no driver answers.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkfleet.vllm.plugins.module_utils import nvidia_driver, nvidia_smi


def main():
    module = AnsibleModule(argument_spec={"nvidia_smi": {"type": "str", "default": "nvidia-smi"}}, supports_check_mode=True)
    command = module.params["nvidia_smi"]
    binary = command if "/" in command else module.get_bin_path(command)
    if not binary:
        module.exit_json(changed=False, **nvidia_driver.loaded_driver(None, "", "", found=False))
    rc, out, err = module.run_command([binary])
    try:
        result = nvidia_driver.loaded_driver(rc, out, err)
    except nvidia_smi.NvidiaSmiError as error:
        module.fail_json(msg=f"{binary} printed something that is not nvidia-smi's table: {error}", stdout=out[:2000])
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
