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
  - With I(summary_path), also a JSON summary of this run (each wave's medians and what was measured), and, with
    I(baseline_path), the previous run's summary as a regression baseline - a section comparing each figure under
    I(baseline_tolerance), returned as C(baseline) so the caller can gate on it.
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
  summary_path:
    description:
      - Where to write this run's summary (each wave's medians, I(identity), the sha of each scenario's definition), which
        the next run of the same engine and lane takes as its regression baseline. Not written when unset.
    type: path
  identity:
    description:
      - What was measured (engine, lane, profile, image ID, argv hash, vLLM), kept in the summary; the comparison says
        which of these differ from the baseline's, and compares nothing when the profile differs.
    type: dict
    default: {}
  scenario_definitions:
    description: The definitions of the scenarios that ran; only scenarios defined the same way as in the baseline are compared.
    type: dict
    default: {}
  baseline_path:
    description:
      - A previous run's summary (I(summary_path) of that run). Each wave is compared with the baseline's wave of the same
        scenario and concurrency, figure by figure (TTFT content, E2E, decode, prefill), in the report's section
        C(Against the previous run at this site). An unreadable or foreign file fails naming it.
    type: path
  baseline_tolerance:
    description:
      - Figure -> the fraction it may be worse than the baseline before it counts as a regression (C(0.25) lets a time
        grow to 1.25x and a rate fall to 0.75x); figures not named are shown, never counted.
    type: dict
    default: {}
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

- name: The same, compared with the previous run at this site
  sparkfleet.vllm.bench_report:
    waves: "{{ bench.waves }}"
    title: "Smoke benchmark, lane 500k"
    markdown_path: reports/bench-sparks-500k-20261202T060000Z.md
    plot_path: reports/bench-sparks-500k-20261202T060000Z.png
    summary_path: reports/bench-sparks-500k-20261202T060000Z.json
    identity: {engine: sparks, lane: 500k, profile: gb10}
    scenario_definitions: "{{ scenarios }}"
    baseline_path: reports/bench-sparks-500k-20261201T210000Z.json
    baseline_tolerance: {ttft_content_s: 0.25, e2e_s: 0.25, decode_tps: 0.2, prefill_tps: 0.25}
  delegate_to: localhost
  register: report
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
baseline:
  description:
    - The comparison with I(baseline_path) - C(compared), C(why_not) when nothing was compared, C(differs) (identity keys
      that changed), C(rows) and C(regressions) (one sentence each, naming scenario, concurrency, figure and both values).
  returned: success
  type: dict
  sample: {"compared": true, "why_not": "", "differs": ["image_id"], "rows": [], "regressions": []}
"""

import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

try:
    import matplotlib  # noqa: F401 pylint: disable=unused-import

    HAS_MATPLOTLIB = True
except ImportError:  # pragma: no cover - depends on the host
    HAS_MATPLOTLIB = False

from ansible_collections.sparkfleet.vllm.plugins.module_utils import bench_baseline, bench_report


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
            "summary_path": {"type": "path"},
            "identity": {"type": "dict", "default": {}},
            "scenario_definitions": {"type": "dict", "default": {}},
            "baseline_path": {"type": "path"},
            "baseline_tolerance": {"type": "dict", "default": {}},
        },
        supports_check_mode=True,
    )
    if not HAS_MATPLOTLIB:
        module.fail_json(msg=missing_required_lib("matplotlib"))
    params = module.params
    comparison = None
    try:
        if params["baseline_path"] or params["baseline_tolerance"]:
            bench_baseline.checked_tolerance(params["baseline_tolerance"])
        if params["summary_path"]:
            baseline = None
            if params["baseline_path"]:
                with open(params["baseline_path"], encoding="utf-8") as handle:
                    baseline = bench_baseline.loaded(handle.read(), params["baseline_path"])
            comparison = bench_baseline.compare(params["waves"], params["scenario_definitions"], params["identity"], baseline, params["baseline_tolerance"])
    except (OSError, bench_baseline.BaselineError) as error:
        module.fail_json(msg=str(error))
    if module.check_mode:
        module.exit_json(changed=False, markdown_path=params["markdown_path"], plot_path=params["plot_path"], baseline=comparison)
    text = bench_report.markdown(
        params["title"],
        params["facts"],
        params["waves"],
        params["skipped"],
        params["missed"],
        params["reference"],
        params["reference_source"],
        comparison,
        os.path.basename(params["baseline_path"] or "") or None,
    )
    outputs = {params["markdown_path"]: ".md", params["plot_path"]: ".png", **({params["summary_path"]: ".json"} if params["summary_path"] else {})}
    temporaries = {path: _temporary(path, suffix) for path, suffix in outputs.items()}
    try:
        with open(temporaries[params["markdown_path"]], "w", encoding="utf-8") as handle:
            handle.write(text)
        bench_report.plot(temporaries[params["plot_path"]], params["title"], params["waves"])
        if params["summary_path"]:
            with open(temporaries[params["summary_path"]], "w", encoding="utf-8") as handle:
                json.dump(bench_baseline.summary(params["waves"], params["identity"], params["scenario_definitions"]), handle, indent=1, sort_keys=True)
                handle.write("\n")
        for path, temporary in temporaries.items():
            os.chmod(temporary, 0o644)  # mkstemp makes 0600; reports are for reading
            os.replace(temporary, path)
    finally:
        for leftover in temporaries.values():
            if os.path.exists(leftover):
                os.unlink(leftover)
    module.exit_json(changed=False, markdown_path=params["markdown_path"], plot_path=params["plot_path"], baseline=comparison)


if __name__ == "__main__":
    main()
