# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Filter: the GPU samples of every node during the smoke benchmark -> their summary and the report's line.

Documented in gpu_telemetry.yml (ansible-doc -t filter sparkfleet.vllm.gpu_telemetry).
"""

from __future__ import annotations

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.deferred import module_utils
from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.filter_errors import as_filters


def gpu_telemetry(per_node):
    """{node: the sampler's CSV} -> {nodes: {node: {samples, sm_clock_mhz, power_w, temperature_c}}, line}."""
    telemetry = module_utils("gpu_telemetry")
    nodes = telemetry.summary(dict(per_node))
    return {"nodes": nodes, "line": telemetry.report_line(nodes)}


class FilterModule:
    """sparkfleet.vllm GPU telemetry filter."""

    def filters(self):
        return as_filters({"gpu_telemetry": gpu_telemetry})
