# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Filters: a profile's container settings as Docker CLI options, and what Docker's refusal of one means (module_utils/container_spec.py).

Documented in the YAML files beside this one (ansible-doc -t filter sparkfleet.vllm.NAME).
"""

from __future__ import annotations

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.deferred import deferred, module_utils
from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filter_errors import as_filters


def docker_run_options(profile, shm_size=None, ulimits=True):
    container_spec = module_utils("container_spec")
    profile = profile or {}
    return container_spec.docker_run_options(
        gpus=bool(profile.get("gpus")),
        devices=profile.get("devices") or [],
        ulimits=(profile.get("ulimits") or []) if ulimits else [],
        shm_size=shm_size,
    )


class FilterModule:
    """sparkfleet.vllm container spec filter."""

    def filters(self):
        return as_filters({"docker_run_options": docker_run_options, "docker_refusal_fix": deferred("container_spec", "docker_refusal_fix")})
