#!/usr/bin/python
# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Ansible module: write stream_bench's results as a Markdown report and a PNG plot."""

from __future__ import annotations

DOCUMENTATION = r"""
module: bench_report
short_description: Write a streaming benchmark's Markdown report and PNG plot
version_added: 0.1.0
description:
  - Takes the I(waves) returned by M(sparkfleet.vllm.stream_bench) and writes a Markdown report laid out
    like the recipe's BENCH.md (per scenario, one row per concurrency, the published reference beside it
    when given) and a PNG plot (matplotlib) of time to first token and decode rate against concurrency.
  - Files are written next to their final names and moved into place. A report is an output of the run,
    not state of a host, so the module reports changed=false.
options:
  waves:
    description: stream_bench's C(waves).
    type: list
    elements: dict
    required: true
  skipped:
    description: stream_bench's C(skipped).
    type: list
    elements: dict
    default: []
  missed:
    description: stream_bench's C(missed).
    type: list
    elements: str
    default: []
  title:
    description: First line of the report and title of the plot.
    type: str
    required: true
  facts:
    description: Lines under the title (lane, profile, model, URL, nodes, time), in order.
    type: dict
    default: {}
  reference:
    description: The published table of this lane (scenario -> rows with conc, ttft_s, e2e_s, decode_tps, prefill_tps).
    type: dict
  reference_source:
    description: Where the reference comes from, said in the report.
    type: str
  markdown_path:
    description: Where to write the Markdown report.
    type: path
    required: true
  plot_path:
    description: Where to write the PNG plot.
    type: path
    required: true
attributes:
  check_mode:
    support: full
    details: Writes nothing in check mode.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: A report is an output of the run, never reported as a change of the host.
extends_documentation_fragment:
  - sparkfleet.vllm.attributes
author:
  - sparkfleet developers (@sparkfleet)
"""

EXAMPLES = r"""
- name: Report of a smoke benchmark
  sparkfleet.vllm.bench_report:
    waves: "{{ bench.waves }}"
    skipped: "{{ bench.skipped }}"
    missed: "{{ bench.missed }}"
    title: "Smoke benchmark, lane 500k"
    facts: {lane: 500k, profile: gb10}
    markdown_path: reports/bench-500k.md
    plot_path: reports/bench-500k.png
  delegate_to: localhost
"""

RETURN = r"""
markdown_path:
  description: The Markdown report.
  returned: success
  type: str
plot_path:
  description: The PNG plot.
  returned: success
  type: str
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

try:
    import matplotlib  # noqa: F401 pylint: disable=unused-import

    HAS_MATPLOTLIB = True
except ImportError:  # pragma: no cover - depends on the host
    HAS_MATPLOTLIB = False

from ansible_collections.sparkfleet.vllm.plugins.module_utils import bench_report


def _temporary(path: str, suffix: str) -> str:
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    handle, name = tempfile.mkstemp(dir=directory, prefix=".bench_report.", suffix=suffix)
    os.close(handle)
    return name


def main():
    module = AnsibleModule(
        argument_spec={
            "waves": {"type": "list", "elements": "dict", "required": True},
            "skipped": {"type": "list", "elements": "dict", "default": []},
            "missed": {"type": "list", "elements": "str", "default": []},
            "title": {"type": "str", "required": True},
            "facts": {"type": "dict", "default": {}},
            "reference": {"type": "dict"},
            "reference_source": {"type": "str"},
            "markdown_path": {"type": "path", "required": True},
            "plot_path": {"type": "path", "required": True},
        },
        supports_check_mode=True,
    )
    if not HAS_MATPLOTLIB:
        module.fail_json(msg=missing_required_lib("matplotlib"))
    params = module.params
    if module.check_mode:
        module.exit_json(changed=False, markdown_path=params["markdown_path"], plot_path=params["plot_path"])
    text = bench_report.markdown(
        params["title"], params["facts"], params["waves"], params["skipped"], params["missed"], params["reference"], params["reference_source"]
    )
    markdown_tmp = _temporary(params["markdown_path"], ".md")
    plot_tmp = _temporary(params["plot_path"], ".png")
    try:
        with open(markdown_tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
        bench_report.plot(plot_tmp, params["title"], params["waves"])
        for temporary in (markdown_tmp, plot_tmp):
            os.chmod(temporary, 0o644)  # mkstemp makes 0600; reports are for reading
        os.replace(markdown_tmp, params["markdown_path"])
        os.replace(plot_tmp, params["plot_path"])
    finally:
        for leftover in (markdown_tmp, plot_tmp):
            if os.path.exists(leftover):
                os.unlink(leftover)
    module.exit_json(changed=False, markdown_path=params["markdown_path"], plot_path=params["plot_path"])


if __name__ == "__main__":
    main()
