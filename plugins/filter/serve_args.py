# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Filters: lanes and engine settings -> the argv and environment of a rank.

Documented per filter in the YAML files beside this one (ansible-doc -t filter sparkfleet.vllm.NAME).
"""

from __future__ import annotations

from ansible_collections.sparkfleet.vllm.plugins.module_utils import gpu_memory, serve_args
from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filter_errors import raising_filter_errors


def _wrap(function):
    return raising_filter_errors(function, serve_args.ServeArgsError, gpu_memory.GpuMemoryError)


class FilterModule:
    """sparkfleet.vllm engine filters."""

    def filters(self):
        return {
            "serve_argv": _wrap(serve_args.serve_argv),
            "serve_argv_by_lane": _wrap(serve_args.serve_argv_by_lane),
            "argv_sets": _wrap(serve_args.argv_sets),
            "argv_set_sha": _wrap(serve_args.argv_set_sha),
            "accepted_argv_sets": _wrap(serve_args.accepted_argv_sets),
            "rank_restart_diff": _wrap(serve_args.rank_restart_diff),
            "checked_lane": _wrap(serve_args.checked_lane),
            "engine_tensor_parallel_size": _wrap(serve_args.tensor_parallel_size),
            "engine_env": _wrap(serve_args.engine_env),
            "redact_argv": _wrap(serve_args.redact_argv),
            "redact_env": _wrap(serve_args.redact_env),
            "checked_gmu": _wrap(gpu_memory.check_gmu),
            "serve_flag_variables": _wrap(serve_args.flag_variables),
            "serve_flag_argument_spec": _wrap(serve_args.flag_argument_spec),
        }
