# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Filters: lanes and engine settings -> the argv and environment of a rank.

Documented per filter in the YAML files beside this one (ansible-doc -t filter sparkfleet.vllm.NAME).
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.vllm.plugins.module_utils import gpu_memory, serve_args


def _wrap(function):
    def call(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except (serve_args.ServeArgsError, gpu_memory.GpuMemoryError) as error:
            raise AnsibleFilterError(str(error)) from error

    call.__name__ = function.__name__
    call.__doc__ = function.__doc__
    return call


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
        }
