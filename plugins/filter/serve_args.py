# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Filters: lanes and engine settings -> the argv and environment of a rank.

Documented per filter in the YAML files beside this one (ansible-doc -t filter sparkfleet.vllm.NAME).
"""

from __future__ import annotations

from ansible_collections.sparkfleet.vllm.plugins.module_utils import gpu_memory, serve_args
from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filter_errors import as_filters


class FilterModule:
    """sparkfleet.vllm engine filters."""

    def filters(self):
        return as_filters(
            {
                "serve_argv": serve_args.serve_argv,
                "serve_argv_by_lane": serve_args.serve_argv_by_lane,
                "argv_sets": serve_args.argv_sets,
                "argv_set_sha": serve_args.argv_set_sha,
                "accepted_argv_sets": serve_args.accepted_argv_sets,
                "rank_restart_diff": serve_args.rank_restart_diff,
                "checked_lane": serve_args.checked_lane,
                "engine_tensor_parallel_size": serve_args.tensor_parallel_size,
                "engine_env": serve_args.engine_env,
                "redact_argv": serve_args.redact_argv,
                "redact_env": serve_args.redact_env,
                "checked_gmu": gpu_memory.check_gmu,
                "serve_flag_variables": serve_args.flag_variables,
                "serve_flag_argument_spec": serve_args.flag_argument_spec,
            }
        )
