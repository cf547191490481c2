#!/usr/bin/python
# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Ansible module: one hop of a chain that streams an artifact from the head to every worker."""

from __future__ import annotations

DOCUMENTATION = r"""
module: fanout
short_description: One hop of a chained stream from the head to the workers (image or weights fan-out)
version_added: 0.1.0
description:
  - The head runs I(source_command) and sends its output to the first worker; each worker receives on
    I(listen), feeds what it receives to I(sink_command) and forwards it to the next worker at once. The
    head sends every byte once, whatever the number of workers; all hops run together.
  - Every hop returns the bytes it moved (and with I(checksum) the stream's sha256); the role compares them
    with the head's. A failure (peer gone, sink exited, source failed) kills the local sink, so a
    C(docker load) or C(tar -x) never takes a short stream for a whole one.
  - Writes its progress to I(status_path) about once a second (the C(fanout_watch) action shows it).
  - Start the workers first (with C(async)); the head and each worker retry the connection to the next hop
    for I(connect_wait_s).
  - The role's tasks decide whether a transfer is needed; this module always moves bytes (changed=true).
requirements:
  - Python 3 on every node, and addresses of the cluster's fabric that the nodes can reach each other on.
options:
  source_command:
    description: On the head, the command whose standard output is the artifact (split like a shell, no shell).
    type: str
  listen:
    description: On a worker, C(ADDRESS:PORT) to receive on (the node's fabric address).
    type: str
  forward:
    description: C(ADDRESS:PORT) of the next worker, if any.
    type: str
  bind:
    description: Address to send from (the node's fabric address), so the stream stays on the fabric.
    type: str
  sink_command:
    description: On a worker, the command that consumes the artifact on its standard input.
    type: str
  status_path:
    description: Progress file (JSON) rewritten during the transfer.
    type: path
  expected_bytes:
    description: The artifact's size when known (for the progress percentage).
    type: int
    default: 0
  connect_wait_s:
    description: How long to wait for the next or previous hop to appear.
    type: float
    default: 120
  idle_timeout_s:
    description: A hop that sends nothing for this long ends the transfer with an error.
    type: float
    default: 600
  checksum:
    description:
      - Hash the stream on this hop (sha256). Off, hops compare byte counts only; the consumer checks content
        (docker load verifies layer digests, the weights' manifest their sha256).
    type: bool
    default: false
attributes:
  check_mode:
    support: none
  diff_mode:
    support: none
  idempotent:
    support: none
    details: Every call sends; the roles call it only for nodes that lack the artifact.
extends_documentation_fragment:
  - sparkfleet.vllm.attributes
author:
  - sparkfleet developers (@sparkfleet)
"""

EXAMPLES = r"""
- name: Receive the image and pass it on (a worker)
  sparkfleet.vllm.fanout:
    listen: 192.168.100.12:29410
    forward: 192.168.100.13:29410
    bind: 192.168.100.12
    sink_command: docker load
  async: 3600
  poll: 0

- name: Send the image once (the head)
  sparkfleet.vllm.fanout:
    source_command: docker save sparkfleet/vllm-cpu:0.32.0
    forward: 192.168.100.12:29410
    bind: 192.168.100.11
    status_path: /opt/sparkfleet/fanout/engine-image.json
"""

RETURN = r"""
bytes:
  description: Bytes that passed through this hop.
  returned: success
  type: int
  sample: 2712345600
sha256:
  description: The sha256 of the stream this hop saw with I(checksum), else empty.
  returned: success
  type: str
seconds:
  description: Time from the first byte to the end of this hop (for the head, the whole chain's).
  returned: success
  type: float
first_byte_at:
  description: Epoch seconds of the first byte (not C(started)/C(finished), which async_status owns).
  returned: success
  type: float
ended_at:
  description: Epoch seconds of the end.
  returned: success
  type: float
sink_output:
  description: What the sink command printed (C(docker load) names the image it loaded).
  returned: success
  type: str
  sample: "Loaded image: sparkfleet/vllm-cpu:0.32.0"
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkfleet.vllm.plugins.module_utils import fanout


def _address(text: str | None, name: str, module: AnsibleModule) -> tuple[str, int] | None:
    if not text:
        return None
    host, _unused, port = text.rpartition(":")
    if not host or not port.isdigit():
        module.fail_json(msg=f"{name} must be ADDRESS:PORT, got {text!r}")
    return host, int(port)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "source_command": {"type": "str"},
            "listen": {"type": "str"},
            "forward": {"type": "str"},
            "bind": {"type": "str"},
            "sink_command": {"type": "str"},
            "status_path": {"type": "path"},
            "expected_bytes": {"type": "int", "default": 0},
            "connect_wait_s": {"type": "float", "default": 120},
            "idle_timeout_s": {"type": "float", "default": 600},
            "checksum": {"type": "bool", "default": False},
        },
        required_one_of=[["source_command", "listen"]],
        mutually_exclusive=[["source_command", "listen"]],
        supports_check_mode=False,
    )
    params = module.params
    try:
        result = fanout.relay(
            source_command=params["source_command"],
            listen=_address(params["listen"], "listen", module),
            forward=_address(params["forward"], "forward", module),
            bind=params["bind"],
            sink_command=params["sink_command"],
            status_path=params["status_path"],
            expected_bytes=params["expected_bytes"],
            connect_wait_s=params["connect_wait_s"],
            idle_timeout_s=params["idle_timeout_s"],
            checksum=params["checksum"],
        )
    except fanout.FanoutError as error:
        module.fail_json(msg=str(error))
    module.exit_json(changed=True, **result)


if __name__ == "__main__":
    main()
