# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Filters: checks of the engine's access settings (key, bind address, ports, clients) and its firewall rules.

Documented per filter in the YAML files beside this one (ansible-doc -t filter sparkfleet.vllm.NAME).
"""

from __future__ import annotations

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
            "firewall_delete_argv": _wrap(access.firewall_delete_argv),
        }
