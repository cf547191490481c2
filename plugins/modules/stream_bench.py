#!/usr/bin/python
# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Ansible module: a streaming benchmark of an OpenAI-compatible chat endpoint (vLLM)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: stream_bench
short_description: Streaming benchmark of a vLLM chat endpoint, with thresholds
version_added: 0.1.0
description:
  - Streams C(/v1/chat/completions) with C(stream_options.include_usage) (asyncio, one keep-alive connection
    per concurrent stream, responses parsed by httptools as they arrive; httpx for the control requests) for each
    scenario and each concurrency level, after one warm-up request per scenario.
  - "Per request: time to the first token of any kind and to the first content token, end-to-end time,
    prompt/completion/reasoning tokens from the usage chunk, decode rate after the first token (and
    over content only when the model reasoned), prefill rate, inter-chunk gaps and tokens per chunk."
  - "Per wave (scenario x concurrency): ok/n and the median of each figure; with the server's Prometheus
    metrics, speculative-decoding acceptance, mean accepted length, KV usage and prefix-cache hits."
  - Fails when a threshold is missed (unless I(report_only)), naming the figure, the threshold and the
    measured value. Bad input (unreachable URL, wrong model, 401, unknown scenario, concurrency 0) fails
    with a message before any wave runs.
  - Runs where it is delegated (the controller by default in the smoke_bench role), with the libraries in
    I(requirements) there. It changes nothing, so changed is always false; check mode skips the benchmark.
requirements:
  - httpx and httptools
  - uvloop and orjson, where installed, lower the client's CPU per streamed token
  - Pillow for the image scenario, prometheus_client for the server's metrics
options:
  headers:
    description:
      - More request headers, on every request of the benchmark. Through the front door the smoke_bench role sends
        C(X-Sparkfleet-Engine) naming the engine it measures, so that the front door sends each request to that
        engine and no other.
    type: dict
    default: {}
  scenarios:
    description: Names of the scenarios to run, in order.
    type: list
    elements: str
    default: [small, reasoning]
  scenario_definitions:
    description:
      - Scenarios as data, by name. Keys are C(prompt), C(max_tokens), C(thinking) (bool),
        C(prompt_tokens) (pad the prompt to about this many tokens, salted per request so no prefix
        cache helps), C(image) (C(width) and C(height) of a generated PNG sent by C(image_url)),
        C(temperature), C(seed), C(ignore_eos).
      - Defaults to the recipe's four scenarios (small, reasoning, large, image).
    type: dict
  concurrency:
    description: A whole number N (levels 1..N) or a list of levels.
    type: raw
    default: 1
  timeout_s:
    description: Per-request timeout (seconds), from sending to the end of the stream.
    type: float
    default: 300
  warmup:
    description: Send one request per scenario first and do not count it (compiles, caches, encoders).
    type: bool
    default: true
  multimodal:
    description: The served model takes images; scenarios with C(image) are skipped (with the reason) otherwise.
    type: bool
    default: false
  read_metrics:
    description: Read the server's C(/metrics) before and after each scenario.
    type: bool
    default: true
  thresholds:
    description:
      - "Per scenario: C(<figure>_min) / C(<figure>_max) limits, and C(by_concurrency: {N: {...}}).
        Figures: ok_ratio, ttft_s, ttft_content_s, e2e_s, decode_tps, content_decode_tps, recipe_decode_tps,
        prefill_tps, tpot_ms, tokens_per_chunk."
    type: dict
    default: {}
  reference:
    description:
      - A published table for the lane (the shape of one lane of C(bench-gb10.yaml), scenario -> rows with
        C(conc), C(ttft_s), C(e2e_s), C(decode_tps), C(prefill_tps), C(ok)). Thresholds are derived from it with
        I(reference_tolerance), and C(ok_ratio_min) from each row's C(ok) (a published 2/3 lets one request of three
        fail; a row without failures, or without C(ok), lets none); explicit I(thresholds) win.
    type: dict
  reference_tolerance:
    description: Fraction a figure may be worse than the reference (0.5 = times up to 1.5x, rates down to 0.5x).
    type: float
    default: 0.5
  report_only:
    description: Report missed thresholds without failing.
    type: bool
    default: false
  jsonl_path:
    description: Write every request's figures here as JSON lines (on the host that runs the module).
    type: path
attributes:
  check_mode:
    support: full
    details: Check mode sends no request.
  diff_mode:
    support: N/A
    details: Changes nothing on any host.
  idempotent:
    support: full
    details: Sends requests but changes no state; never reports a change.
extends_documentation_fragment:
  - sparkfleet.vllm.attributes
  - sparkfleet.vllm.engine_api
author:
  - sparkfleet developers (@sparkfleet)
"""

EXAMPLES = r"""
- name: Ping and reasoning at concurrency 1..5, from the controller
  sparkfleet.vllm.stream_bench:
    url: http://192.168.100.11:8000
    model: glm-5.3-flash
    scenarios: [small, reasoning]
    concurrency: 5
    thresholds:
      small: {ok_ratio_min: 1.0, ttft_s_max: 2.0}
  delegate_to: localhost
  run_once: true

- name: Against the published GB10 numbers with 30% tolerance, report only
  sparkfleet.vllm.stream_bench:
    url: http://spark1:8000
    model: glm-5.3-flash
    api_key: "{{ vault_engine_api_key }}"
    scenarios: [small, reasoning, large, image]
    multimodal: true
    concurrency: [1, 2, 3, 4, 5]
    reference: "{{ (lookup('file', 'bench-gb10.yaml') | from_yaml).lanes['500k'] }}"
    reference_tolerance: 0.3
    report_only: true
"""

RETURN = r"""
waves:
  description:
    - One summary per scenario and concurrency (medians over the wave's ok requests).
    - Where C(/metrics) was read, every wave of a scenario also carries that scenario's token cross-check
      (C(client_prompt_tokens), C(client_completion_tokens) summed over its requests' usage;
      C(metrics_prompt_tokens), C(metrics_completion_tokens) from vLLM's counters before and after;
      C(metrics_agree)).
    - A wave whose streams arrived whole in one network read (C(arrived_at_once), their count) has no decode
      time to measure, so it runs once more and C(rerun) says so. Both tries' requests are in C(requests) and
      in the request log (its C(try) field).
  returned: always
  type: list
  elements: dict
  sample: [{"scenario": "small", "concurrency": 1, "ok": "1/1", "ttft_s": 0.31, "ttft_content_s": 0.31,
            "e2e_s": 1.3, "decode_tps": 31.9, "tokens_per_chunk": 2.8, "gap_p99_ms": 120.0,
            "start_spread_ms": 0.0, "spec_decode_mean_accepted_length": 2.87, "thresholds": {"ttft_s_max": 2.0},
            "client_completion_tokens": 32, "metrics_completion_tokens": 32, "metrics_agree": true}]
skipped:
  description: Scenarios not run, with the reason.
  returned: always
  type: list
  elements: dict
  sample: [{"scenario": "image", "reason": "glm-5.3-flash is not served as a multimodal model (multimodal: false)"}]
missed:
  description: Thresholds missed, each naming the figure, the threshold and the measured value.
  returned: always
  type: list
  elements: str
  sample: ["small at concurrency 2: ttft_s 0.800 is above the threshold 0.5 (ttft_s_max)"]
requests:
  description: Requests measured (warm-ups excluded).
  returned: always
  type: int
  sample: 10
server_version:
  description: The vLLM version the server reports at C(/version) (null where it has none), for the report's provenance.
  returned: success
  type: str
  sample: "0.32.0"
table:
  description: The waves as a text table, for the end of a play.
  returned: always
  type: list
  elements: str
jsonl_path:
  description: Where every request's figures were written.
  returned: when jsonl_path is set
  type: str
"""

import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

MISSING_LIB = None
try:
    import httpx  # noqa: F401 pylint: disable=unused-import
except ImportError:  # pragma: no cover - depends on the host
    MISSING_LIB = "httpx"
try:
    import httptools  # noqa: F401 pylint: disable=unused-import
except ImportError:  # pragma: no cover - depends on the host
    MISSING_LIB = MISSING_LIB or "httptools"

from ansible_collections.sparkfleet.vllm.plugins.module_utils import stream_bench as sb

if MISSING_LIB is None:
    from ansible_collections.sparkfleet.vllm.plugins.module_utils import stream_client


def main():
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "model": {"type": "str", "required": True},
            "api_key": {"type": "str", "no_log": True},
            "headers": {"type": "dict", "default": {}},
            "scenarios": {"type": "list", "elements": "str", "default": ["small", "reasoning"]},
            "scenario_definitions": {"type": "dict"},
            "concurrency": {"type": "raw", "default": 1},
            "timeout_s": {"type": "float", "default": 300},
            "warmup": {"type": "bool", "default": True},
            "multimodal": {"type": "bool", "default": False},
            "read_metrics": {"type": "bool", "default": True},
            "thresholds": {"type": "dict", "default": {}},
            "reference": {"type": "dict"},
            "reference_tolerance": {"type": "float", "default": 0.5},
            "report_only": {"type": "bool", "default": False},
            "jsonl_path": {"type": "path"},
        },
        supports_check_mode=True,
    )
    if MISSING_LIB:
        module.fail_json(msg=missing_required_lib(MISSING_LIB))
    params = module.params
    try:
        levels = sb.concurrency_levels(params["concurrency"])
        scenarios = sb.select_scenarios(params["scenarios"], params["scenario_definitions"] or sb.DEFAULT_SCENARIOS)
        if not 0 <= params["reference_tolerance"] < 1:
            raise sb.StreamBenchError(f"reference_tolerance {params['reference_tolerance']} must be at least 0 and below 1, e.g. 0.3")
    except sb.StreamBenchError as error:
        module.fail_json(msg=str(error))
    if module.check_mode:
        module.exit_json(changed=False, waves=[], skipped=[], missed=[], requests=0, table=[], msg="check mode: no request sent")

    jsonl = None
    if params["jsonl_path"]:
        # Written beside the final name and moved into place: a failed run leaves no half file.
        directory = os.path.dirname(params["jsonl_path"]) or "."
        os.makedirs(directory, exist_ok=True)
        jsonl = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed in the finally below, then moved into place
            "w", dir=directory, prefix=".stream_bench.", suffix=".tmp", delete=False, encoding="utf-8"
        )

    def on_request(figures):
        if jsonl:
            jsonl.write(json.dumps(figures, sort_keys=True) + "\n")

    try:
        outcome = stream_client.run_benchmark(
            params["url"],
            params["model"],
            scenarios,
            levels,
            api_key=params["api_key"],
            timeout_s=params["timeout_s"],
            warmup=params["warmup"],
            multimodal=params["multimodal"],
            read_metrics=params["read_metrics"],
            on_request=on_request,
            headers=params["headers"],
        )
    except sb.StreamBenchError as error:
        outcome = {"failed": True, "msg": str(error), "waves": [], "skipped": []}
    finally:
        if jsonl:
            jsonl.close()
    if outcome["failed"]:
        if jsonl:
            os.unlink(jsonl.name)
        module.fail_json(msg=outcome["msg"], waves=[], skipped=outcome.get("skipped", []), missed=[], requests=0, table=[])
    if jsonl:
        os.chmod(jsonl.name, 0o644)  # NamedTemporaryFile makes 0600; the request log is for reading
        os.replace(jsonl.name, params["jsonl_path"])

    missed = []
    try:
        for wave in outcome["waves"]:
            limits = sb.thresholds_for(wave["scenario"], wave["concurrency"], params["thresholds"], params["reference"], params["reference_tolerance"])
            wave["thresholds"] = limits
            wave["missed"] = sb.check_thresholds(wave, limits)
            missed.extend(wave["missed"])
    except sb.StreamBenchError as error:
        module.fail_json(msg=str(error), waves=outcome["waves"])
    result = {
        "changed": False,
        "waves": outcome["waves"],
        "skipped": outcome["skipped"],
        "missed": missed,
        "requests": outcome["requests"],
        "server_version": outcome.get("server_version"),
        "table": sb.text_table(outcome["waves"], outcome["skipped"]),
    }
    if params["jsonl_path"]:
        result["jsonl_path"] = params["jsonl_path"]
    if missed and not params["report_only"]:
        module.fail_json(msg=f"{len(missed)} benchmark threshold(s) missed: " + "; ".join(missed), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
