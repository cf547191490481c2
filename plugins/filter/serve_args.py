# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Filters: lanes and engine settings -> the argv and environment of a rank."""

from __future__ import annotations

DOCUMENTATION = r"""
name: serve_argv
short_description: Render the C(vllm serve) argv of one engine rank
version_added: 0.1.0
description:
  - Turns the engine settings, a checked lane and the rank's place in the engine
    into the container command, as a list (never a shell string).
  - Ranks above 0 get C(--headless). The API key is never in argv; the engine role gives it to rank 0 as C(VLLM_API_KEY).
  - The same file provides C(checked_lane), C(engine_tensor_parallel_size),
    C(engine_env), C(redact_argv), C(redact_env), C(checked_gmu), and for the engine role's one parse of every lane's argv C(serve_argv_by_lane), C(argv_sets),
    C(argv_set_sha) and C(accepted_argv_sets); see the README of the collection.
positional: settings
options:
  settings:
    description: Engine settings (see the engine role's argument_specs).
    type: dict
    required: true
  lane:
    description: The lane, as returned by C(checked_lane).
    type: dict
    required: true
  rank:
    description: The node rank (0 = head).
    type: int
    required: true
  nnodes:
    description: Number of nodes in the engine.
    type: int
    required: true
  master_addr:
    description: The head's fabric address.
    type: str
    required: true
  master_port:
    description: The torch.distributed port on the head.
    type: int
    required: true
"""

EXAMPLES = r"""
- name: Render rank 1's argv
  ansible.builtin.debug:
    msg: "{{ engine_settings | sparkfleet.vllm.serve_argv(lane=engine_lane, rank=1, nnodes=4,
              master_addr='192.168.100.11', master_port=29500) }}"
"""

RETURN = r"""
_value:
  description: The argv, starting with C(vllm serve MODEL).
  type: list
  elements: str
"""

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
            "checked_lane": _wrap(serve_args.checked_lane),
            "engine_tensor_parallel_size": _wrap(serve_args.tensor_parallel_size),
            "engine_env": _wrap(serve_args.engine_env),
            "redact_argv": _wrap(serve_args.redact_argv),
            "redact_env": _wrap(serve_args.redact_env),
            "checked_gmu": _wrap(gpu_memory.check_gmu),
        }
