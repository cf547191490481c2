# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Filters: checks of the engine's access settings (key, bind address, ports, clients) and its firewall rules.

Documented per filter in the YAML files beside this one (ansible-doc -t filter sparkfleet.vllm.NAME).
"""

from __future__ import annotations

from ansible_collections.sparkfleet.vllm.plugins.module_utils import access
from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filter_errors import raising_filter_errors


def _wrap(function):
    return raising_filter_errors(function, access.AccessError)


class FilterModule:
    """sparkfleet.vllm access filters."""

    def filters(self):
        return {
            "firewall_rules": _wrap(access.firewall_rules),
            "checked_api_key": _wrap(access.checked_api_key),
            "checked_front_door_clients": _wrap(access.checked_front_door_clients),
            "checked_extra_args": _wrap(access.checked_extra_args),
            "checked_bind_address": _wrap(access.checked_bind_address),
            "checked_ports": _wrap(access.checked_ports),
            "checked_client_networks": _wrap(access.checked_client_networks),
            "firewall_delete_argv": _wrap(access.firewall_delete_argv),
        }
