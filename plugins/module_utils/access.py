# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Who may reach the engine, and with what key: checks of the access settings and the firewall's rules.

Every check raises AccessError with the bad value and the fix, except for the API
key, whose messages never contain the key itself (they end up in Ansible's output).
"""

from __future__ import annotations

import ipaddress
import re
import shlex

MIN_API_KEY_LENGTH = 16
# The comment every rule of ours carries: how the role finds (and removes) them again.
FIREWALL_COMMENT = "sparkfleet"


class AccessError(ValueError):
    """A bad access setting, with the fix."""


def checked_api_key(key):
    """The key, if usable as a bearer token; '' means no key. The message never quotes the key."""
    if key is None or key == "":
        return ""
    if not isinstance(key, str):
        raise AccessError(f"engine_api_key must be a string, got a {type(key).__name__}. Quote it in the vault file.")
    if len(key) < MIN_API_KEY_LENGTH:
        raise AccessError(
            f"engine_api_key is {len(key)} characters long; use at least {MIN_API_KEY_LENGTH}"
            " (for instance `openssl rand -hex 24`, then ansible-vault encrypt_string)."
        )
    if re.search(r"\s", key) or not key.isprintable():
        raise AccessError(
            "engine_api_key contains whitespace or control characters; a bearer token cannot carry them. Generate a new one (openssl rand -hex 24)."
        )
    return key


CLIENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def checked_front_door_clients(clients, bench_client=""):
    """The front door's clients, [{name, key}]: each name a word, each key a bearer token of its own. [] means no key
    is asked at the front door. bench_client (smoke_bench_front_door_client), when set, must be one of them.
    Messages name the client, never quote a key."""
    if clients is None or clients == "":
        clients = []
    if isinstance(clients, (str, dict)) or not isinstance(clients, (list, tuple)):
        raise AccessError(f"front_door_clients must be a list of {{name, key}}, got a {type(clients).__name__}.")
    names, keys = set(), set()
    for position, client in enumerate(clients, start=1):
        if not isinstance(client, dict) or set(client) != {"name", "key"}:
            raise AccessError(f"front_door_clients entry {position} must have exactly a name and a key (vaulted): {{name: alice, key: ...}}.")
        name = str(client["name"])
        if not CLIENT_NAME.match(name):
            raise AccessError(
                f"front_door_clients name {name!r} must be a word of letters, digits, '.', '_' or '-' (at most 64): the log and the request counts carry it."
            )
        if name in names:
            raise AccessError(f"front_door_clients names {name!r} twice: give each client one entry.")
        try:
            key = checked_api_key(client["key"])
        except AccessError as error:
            raise AccessError(f"front_door_clients {name!r}: {str(error).replace('engine_api_key', 'its key')}") from None
        if not key:
            raise AccessError(f"front_door_clients {name!r} has an empty key: give it one (openssl rand -hex 24, then ansible-vault encrypt_string).")
        if key in keys:
            raise AccessError(f"front_door_clients {name!r} has the key of another client: each client needs its own, so that removing one stops only it.")
        names.add(name)
        keys.add(key)
    if bench_client and not names:
        raise AccessError(
            f"smoke_bench_front_door_client is {bench_client!r}, but front_door_clients lists no client: "
            "leave smoke_bench_front_door_client empty, or list that client in front_door_clients."
        )
    if bench_client and str(bench_client) not in names:
        raise AccessError(
            f"smoke_bench_front_door_client is {bench_client!r}, which is not one of front_door_clients ({', '.join(sorted(names))}): "
            "name one of them, or leave it empty for the first."
        )
    return list(clients)


def checked_extra_args(extra_args):
    """Refuse a key in engine_extra_args: argv is readable by every local user and shown in reports."""
    for item in extra_args or []:
        if str(item).split("=", 1)[0] == "--api-key":
            raise AccessError("engine_extra_args carries --api-key: set engine_api_key (vaulted) instead; it reaches the head as VLLM_API_KEY, never in argv.")
    return extra_args


def checked_bind_address(address):
    """The API's bind address: one IP address (0.0.0.0 = every interface)."""
    try:
        return str(ipaddress.ip_address(str(address).strip()))
    except ValueError:
        raise AccessError(
            f"engine_api_host {address!r} is not an IP address. Use 0.0.0.0 (every interface), the head's"
            " fabric or LAN address, or 127.0.0.1 (clients on the head only)."
        ) from None


def checked_ports(ports):
    """{setting name: port}: each an integer in 1-65535, all different. Returns {name: int}."""
    checked = {}
    for name, value in ports.items():
        try:
            port = int(str(value))
        except ValueError:
            raise AccessError(f"{name} {value!r} is not a port number: use an integer from 1 to 65535.") from None
        if not 1 <= port <= 65535:
            raise AccessError(f"{name} {port} is outside 1-65535: pick a free port in that range.")
        clash = [other for other, used in checked.items() if used == port]
        if clash:
            raise AccessError(f"{name} and {clash[0]} are both {port}: every service of the engine needs its own port.")
        checked[name] = port
    return checked


def service_node(node, setting, nodes, heads, checked=True):
    """The node a service of the whole cluster runs on (the front door: front_door_node; Prometheus: monitoring_node):
    the one of the cluster's nodes that `setting` names, or, empty, the first engine's head. checked=False returns a
    named node unchecked (for a check that the setting's own refusal already precedes)."""
    heads = list(heads)
    if node is None or node == "":
        return heads[0]
    if checked and (not isinstance(node, str) or node not in nodes):
        raise AccessError(
            f"{setting} is {node!r}, which is not one of the cluster's nodes ({', '.join(nodes)}): name the node it runs on, "
            f"or leave {setting} empty for the first engine's head ({heads[0]})."
        )
    return node


def checked_grafana_node(node, hosts, monitoring_host, listen_address="127.0.0.1"):
    """monitoring_grafana_node: '' (no Grafana), or an inventory host that reaches the cluster's Prometheus - its own
    node, or any node while Prometheus listens beyond its loopback (monitoring_listen_address)."""
    if node is None or node == "":
        return ""
    if not isinstance(node, str) or node not in hosts:
        raise AccessError(
            f"monitoring_grafana_node is {node!r}, which is not a host of the inventory: name the inventory host Grafana runs on "
            "(add it to the inventory if it is not a Spark), or leave it empty for no Grafana."
        )
    try:
        loopback = ipaddress.ip_address(str(listen_address)).is_loopback
    except ValueError:
        raise AccessError(f"monitoring_listen_address {listen_address!r} is not an IP address: give {monitoring_host}'s, 127.0.0.1 or 0.0.0.0.") from None
    if node != monitoring_host and loopback:
        raise AccessError(
            f"monitoring_grafana_node is {node}, but Prometheus listens on {listen_address} of {monitoring_host} only, which {node} cannot reach: "
            f"set monitoring_listen_address to {monitoring_host}'s cluster address (or 0.0.0.0), or run Grafana on {monitoring_host}."
        )
    return node


def checked_client_networks(networks):
    """Allowed client networks (addresses or CIDRs) -> normalised CIDR strings."""
    if isinstance(networks, str) or not isinstance(networks, (list, tuple)):
        raise AccessError(f"engine_firewall_allowed_clients must be a list of addresses or networks (CIDR), got {networks!r}.")
    checked = []
    for network in networks:
        try:
            checked.append(str(ipaddress.ip_network(str(network).strip(), strict=False)))
        except ValueError:
            raise AccessError(f"engine_firewall_allowed_clients entry {network!r} is not an address or network: write it as 10.0.0.5 or 10.0.0.0/24.") from None
    return checked


def _ip_sources(addresses):
    """The addresses that are IP addresses, as CIDRs, each once; a host name is not one (iptables would resolve it)."""
    found = []
    for address in addresses:
        try:
            network = str(ipaddress.ip_network(str(address).strip(), strict=False))
        except ValueError:
            continue
        if network not in found:
            found.append(network)
    return found


def firewall_rules(api_port, cluster_ports, cluster_addresses, clients, service_addresses=()):
    """The INPUT rules, in order: the cluster reaches every engine port, clients reach the API, the rest is dropped.

    service_addresses: the nodes that run the cluster's front door and Prometheus, which reach every engine's API
    (on the eight-Spark layout, another engine's head). A host name among them is left to the allowed clients.
    Only these ports are touched; everything else on the host (SSH, ...) is left as it is.
    Returns dicts of ansible.builtin.iptables arguments (without state/chain).
    """
    sources = [str(ipaddress.ip_network(address, strict=False)) for address in cluster_addresses]
    services = [address for address in _ip_sources(service_addresses) if address not in sources]
    rules = []
    for port in [api_port, *cluster_ports]:
        for source in sources:
            rules.append({"source": source, "port": port, "jump": "ACCEPT", "why": "the cluster"})
        if port == api_port:
            # Clients of the API on the head itself, the front door's and Prometheus's nodes, then the allowed networks.
            rules.append({"source": "127.0.0.0/8", "port": port, "jump": "ACCEPT", "why": "local clients"})
            for service in services:
                rules.append({"source": service, "port": port, "jump": "ACCEPT", "why": "the front door and Prometheus"})
            for client in checked_client_networks(clients):
                if client not in sources and client not in services:
                    rules.append({"source": client, "port": port, "jump": "ACCEPT", "why": "an allowed client"})
        rules.append({"source": None, "port": port, "jump": "DROP", "why": "everyone else"})
    for rule in rules:
        rule["comment"] = f"{FIREWALL_COMMENT}: {rule['port']} from {rule['source'] or 'anywhere'} ({rule.pop('why')})"
    return rules


def firewall_delete_argv(rule_line):
    """One line of `iptables -S` (an -A command) as the argv that deletes that rule: its own words after -D.

    Split as a shell would split it (the comment is quoted), without a shell: nothing in the line runs."""
    words = shlex.split(rule_line)
    if len(words) < 2 or words[0] != "-A":
        raise AccessError(f"{rule_line!r} is not a rule line of `iptables -S` (it starts with -A CHAIN).")
    return ["-D", *words[1:]]
