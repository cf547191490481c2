# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Filters: checks of the engine's access settings (key, bind address, ports, clients) and its firewall rules.

Documented per filter in the YAML files beside this one (ansible-doc -t filter sparkfleet.vllm.NAME).
"""

from __future__ import annotations

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.deferred import deferred
from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filter_errors import as_filters


class FilterModule:
    """sparkfleet.vllm access filters."""

    def filters(self):
        return as_filters(
            {
                "firewall_rules": deferred("access", "firewall_rules"),
                "checked_api_key": deferred("access", "checked_api_key"),
                "checked_front_door_clients": deferred("access", "checked_front_door_clients"),
                "checked_extra_args": deferred("access", "checked_extra_args"),
                "checked_bind_address": deferred("access", "checked_bind_address"),
                "checked_ports": deferred("access", "checked_ports"),
                "checked_client_networks": deferred("access", "checked_client_networks"),
                "checked_grafana_node": deferred("access", "checked_grafana_node"),
                "service_node": deferred("access", "service_node"),
                "firewall_delete_argv": deferred("access", "firewall_delete_argv"),
            }
        )
