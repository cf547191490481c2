# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Filters: lanes and engine settings -> the argv and environment of a rank.

Documented per filter in the YAML files beside this one (ansible-doc -t filter sparkfleet.vllm.NAME).
"""

from __future__ import annotations

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.deferred import deferred
from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filter_errors import as_filters


class FilterModule:
    """sparkfleet.vllm engine filters."""

    def filters(self):
        return as_filters(
            {
                "serve_argv": deferred("serve_args", "serve_argv"),
                "serve_argv_by_lane": deferred("serve_args", "serve_argv_by_lane"),
                "argv_sets": deferred("serve_args", "argv_sets"),
                "argv_set_sha": deferred("serve_args", "argv_set_sha"),
                "accepted_argv_sets": deferred("serve_args", "accepted_argv_sets"),
                "rank_restart_diff": deferred("serve_args", "rank_restart_diff"),
                "checked_lane": deferred("serve_args", "checked_lane"),
                "engine_tensor_parallel_size": deferred("serve_args", "tensor_parallel_size"),
                "engine_env": deferred("serve_args", "engine_env"),
                "redact_argv": deferred("serve_args", "redact_argv"),
                "redact_env": deferred("serve_args", "redact_env"),
                "checked_gmu": deferred("gpu_memory", "check_gmu"),
                "serve_flag_variables": deferred("serve_args", "flag_variables"),
                "serve_flag_argument_spec": deferred("serve_args", "flag_argument_spec"),
            }
        )
