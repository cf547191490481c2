# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Filters: checks of the engine's access settings (key, bind address, ports, clients) and its firewall rules."""

from __future__ import annotations

DOCUMENTATION = r"""
name: firewall_rules
short_description: The host firewall rules that limit the engine's ports to the cluster and allowed clients
version_added: 0.5.0
description:
  - For the API port and each cluster port (master port, fan-out port), ACCEPT from every node of the
    engine; for the API port also from 127.0.0.0/8 and the allowed client networks; then DROP. Only these
    ports are touched.
  - The same file provides C(checked_api_key) (the message never quotes the key), C(checked_extra_args),
    C(checked_bind_address), C(checked_ports) and C(checked_client_networks); each fails naming the bad
    value and the fix.
positional: api_port
options:
  api_port:
    description: The API port (engine_port).
    type: int
    required: true
  cluster_ports:
    description: Ports only the engine's nodes may reach.
    type: list
    elements: int
    required: true
  cluster_addresses:
    description: The nodes' fabric addresses.
    type: list
    elements: str
    required: true
  clients:
    description: Addresses or CIDR networks allowed to reach the API.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
rules: "{{ 8000 | sparkfleet.vllm.firewall_rules([29500, 29410], ['192.168.100.11', '192.168.100.12'], ['10.0.0.0/24']) }}"
"""

RETURN = r"""
_value:
  description: Rules in order, each with source (null = anywhere), port, jump and comment.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.vllm.plugins.module_utils import access


def _wrap(function):
    def call(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except access.AccessError as error:
            raise AnsibleFilterError(str(error)) from error

    call.__name__ = function.__name__
    call.__doc__ = function.__doc__
    return call


class FilterModule:
    """sparkfleet.vllm access filters."""

    def filters(self):
        return {
            "firewall_rules": _wrap(access.firewall_rules),
            "checked_api_key": _wrap(access.checked_api_key),
            "checked_extra_args": _wrap(access.checked_extra_args),
            "checked_bind_address": _wrap(access.checked_bind_address),
            "checked_ports": _wrap(access.checked_ports),
            "checked_client_networks": _wrap(access.checked_client_networks),
        }
