# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Filters of the host stack: what dpkg has installed, the cluster's driver plan and NCCL's pin.

Documented per filter in the YAML files beside this one (ansible-doc -t filter sparkfleet.vllm.NAME).
"""

from __future__ import annotations

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.deferred import deferred, module_utils
from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filter_errors import as_filters


def driver_plan(loaded, minimum, target, installs_allowed=True, available=None, allow_downgrade=False, os_owned=None):
    """The cluster's driver plan (module_utils/nvidia_driver.plan)."""
    nvidia_driver = module_utils("nvidia_driver")
    return nvidia_driver.plan(loaded, minimum, target, installs_allowed, available=available, allow_downgrade=allow_downgrade, os_owned=os_owned)


def nccl_resolved_version(madison_output, pin, cuda_major):
    """The repository's build of the pinned release; a refusal is returned, not raised: the role's own task fails
    with it, so our sentence is the first line."""
    nccl_pin = module_utils("nccl_pin")
    try:
        return {"version": nccl_pin.resolve_version(pin, nccl_pin.offered_versions(madison_output), cuda_major), "problem": ""}
    except nccl_pin.NcclPinError as error:
        return {"version": "", "problem": str(error)}


class FilterModule:
    """sparkfleet.vllm host-stack filters."""

    def filters(self):
        return as_filters(
            {
                "driver_plan": driver_plan,
                "dpkg_query_argv": deferred("dpkg", "query_argv"),
                "dpkg_installed": deferred("dpkg", "installed_versions"),
                "dpkg_held": deferred("dpkg", "held_packages"),
                "nccl_problems": deferred("nccl_pin", "problems"),
                "nccl_other_version_report": deferred("nccl_pin", "other_version_report"),
                "nccl_conf": deferred("nccl_pin", "nccl_conf"),
                "nccl_resolved_version": nccl_resolved_version,
                "upstream_version": deferred("nvidia_driver", "upstream_version"),
                "driver_versions_offered": deferred("nvidia_driver", "available_versions"),
            }
        )
