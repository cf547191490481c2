#!/usr/bin/python
# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Read every engine's last minutes from the cluster's Prometheus, for status.yml."""

from __future__ import annotations

DOCUMENTATION = r"""
module: prometheus_figures
short_description: Every engine's last minutes, as the cluster's Prometheus holds them
version_added: 0.1.0
description:
  - Asks Prometheus's HTTP API (C(/api/v1/query)) for each engine's generated tokens per second, p95 time to first
    token and inter-token latency, the most KV cache used, the requests in the engine now and whether its C(/metrics)
    answers, all over the last I(window), and for the alerts firing.
  - Runs on the node Prometheus runs on (the monitoring role's), so that Prometheus can listen on that node's
    loopback only.
  - A Prometheus that does not answer is reported, not a failure - status.yml still reports what it reads itself.
options:
  url:
    description: Prometheus's base URL as the node reaches it.
    type: str
    default: http://127.0.0.1:9090
  window:
    description: How far back the figures go (a Prometheus duration, C(5m)).
    type: str
    default: 5m
  node:
    description: How the report names Prometheus's node (its inventory name); empty - the URL's host and port.
    type: str
    default: ""
  timeout:
    description: Seconds each query may take.
    type: float
    default: 10
extends_documentation_fragment:
  - sparkfleet.vllm.attributes
  - sparkfleet.vllm.attributes.READ_ONLY
author: sparkfleet developers (@sparkfleet)
"""

EXAMPLES = r"""
- name: Read the last five minutes
  sparkfleet.vllm.prometheus_figures:
    window: 5m
  register: figures

- name: Show them
  ansible.builtin.debug:
    msg: "{{ figures.lines }}"
"""

RETURN = r"""
reachable:
  description: Whether Prometheus answered.
  returned: always
  type: bool
engines:
  description: Per engine, each figure (a number, or null where there is none in the window).
  returned: always
  type: dict
firing:
  description: The alerts firing, as C(alertname (engine)).
  returned: always
  type: list
  elements: str
lines:
  description: The report, as status.yml prints it.
  returned: always
  type: list
  elements: str
"""

import json
import urllib.parse

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

from ansible_collections.sparkfleet.vllm.plugins.module_utils import monitoring


def _ask(url, query, timeout):
    answer = json.loads(open_url(f"{url.rstrip('/')}/api/v1/query?{urllib.parse.urlencode({'query': query})}", timeout=timeout).read())
    if answer.get("status") != "success":
        raise monitoring.FiguresError(f"Prometheus refused {query!r}: {answer.get('error', answer)}")
    return answer["data"]


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "default": "http://127.0.0.1:9090"},
            "window": {"type": "str", "default": "5m"},
            "node": {"type": "str", "default": ""},
            "timeout": {"type": "float", "default": 10},
        },
        supports_check_mode=True,
    )
    url, window, timeout = module.params["url"], module.params["window"], module.params["timeout"]
    try:
        queries = monitoring.queries(window)
    except monitoring.FiguresError as error:
        module.fail_json(msg=str(error))
    where = module.params["node"] or urllib.parse.urlsplit(url).netloc
    try:
        engines = monitoring.per_engine({figure: _ask(url, query, timeout) for figure, query in queries.items()})
        alerts = monitoring.firing(_ask(url, monitoring.FIRING, timeout))
    except (OSError, ValueError) as error:  # refused, timed out, not JSON, not Prometheus
        said = f"last {window}: Prometheus does not answer at {url} ({error}); is the monitoring on (monitoring_enabled)?"
        module.exit_json(changed=False, reachable=False, engines={}, firing=[], lines=[said])
    module.exit_json(changed=False, reachable=True, engines=engines, firing=alerts, lines=monitoring.lines(engines, alerts, window, where))


if __name__ == "__main__":
    main()
