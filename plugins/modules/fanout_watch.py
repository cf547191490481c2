#!/usr/bin/python
# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Documentation of the fanout_watch action (plugins/action/fanout_watch.py does the work)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: fanout_watch
short_description: Show a running fan-out's progress on the controller until it ends
version_added: 0.1.0
description:
  - Reads the status file that the head's C(fanout) hop rewrites and prints one line every I(interval_s)
    (chain, GiB so far, percentage, MB/s) while the transfer runs; transfers shorter than I(quiet_s) print
    nothing. Ends when the head's hop reports done or failed.
  - Runs on the controller; reads the file over the head's connection. Changes nothing.
options:
  status_path:
    description: The head hop's I(status_path).
    type: path
    required: true
  chain:
    description: The chain's node names, head first (for the progress line).
    type: list
    elements: str
    default: []
  timeout_s:
    description: Give up (failed) after this long.
    type: float
    default: 3600
  interval_s:
    description: Seconds between two reads.
    type: float
    default: 5
  quiet_s:
    description: Print nothing before this many seconds.
    type: float
    default: 5
extends_documentation_fragment:
  - sparkfleet.vllm.attributes
  - sparkfleet.vllm.attributes.READ_ONLY
author:
  - sparkfleet developers (@sparkfleet)
"""

EXAMPLES = r"""
- name: Show the transfer's progress
  sparkfleet.vllm.fanout_watch:
    status_path: /opt/sparkfleet/fanout/engine-image.json
    chain: [spark1, spark2, spark3, spark4]
"""

RETURN = r"""
status:
  description: The head hop's last status record (state, bytes, expected_bytes, sha256 when done).
  returned: always
  type: dict
progress:
  description: The last progress line.
  returned: always
  type: str
  sample: "spark1 -> spark2 -> spark3 -> spark4: 2.53 GiB (100%) of 2.53 GiB, 61 MB/s"
"""
