# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Filters: checks of the engine's access settings (key, bind address, ports, clients) and its firewall rules.

Documented per filter in the YAML files beside this one (ansible-doc -t filter sparkfleet.vllm.NAME).
"""

from __future__ import annotations

from ansible_collections.sparkfleet.vllm.plugins.module_utils import access
from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filter_errors import as_filters


class FilterModule:
    """sparkfleet.vllm access filters."""

    def filters(self):
        return as_filters(
            {
                "firewall_rules": access.firewall_rules,
                "checked_api_key": access.checked_api_key,
                "checked_front_door_clients": access.checked_front_door_clients,
                "checked_extra_args": access.checked_extra_args,
                "checked_bind_address": access.checked_bind_address,
                "checked_ports": access.checked_ports,
                "checked_client_networks": access.checked_client_networks,
                "checked_grafana_node": access.checked_grafana_node,
                "firewall_delete_argv": access.firewall_delete_argv,
            }
        )
