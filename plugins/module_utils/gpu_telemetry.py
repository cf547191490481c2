# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""The GPU's clock, power and temperature on every node during the smoke benchmark (docs/benchmark.md).

The smoke_bench role samples `nvidia-smi --query-gpu=<QUERY> --format=csv,noheader,nounits` on every engine node while
the benchmark streams (roles/smoke_bench/files/gpu_sampler.py). Here the samples become a summary per node and one
line for the report. A GB10 answers `[N/A]` where it has no reading (its memory; its clocks on some drivers): such a
figure is reported as not read, never as 0.
"""

from __future__ import annotations

import statistics

# What the sampler asks nvidia-smi, in this order (the recipe's clock check reads clocks.current.sm).
FIELDS = ("timestamp", "clocks.current.sm", "power.draw", "temperature.gpu")
QUERY = ",".join(FIELDS)
FIGURES = {"clocks.current.sm": "sm_clock_mhz", "power.draw": "power_w", "temperature.gpu": "temperature_c"}


class TelemetryError(ValueError):
    """Samples we cannot read, named with the line."""


def _reading(text):
    text = text.strip()
    if text in ("[N/A]", "N/A", "[Not Supported]", ""):
        return None
    try:
        return float(text.split()[0])
    except ValueError:
        raise TelemetryError(f"nvidia-smi answered {text!r} where a number or [N/A] was asked") from None


def parse(text):
    """The sampler's file -> [{sm_clock_mhz, power_w, temperature_c, timestamp}], one per GPU per sample."""
    samples = []
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        values = [value.strip() for value in line.split(",")]
        if len(values) != len(FIELDS):
            raise TelemetryError(f"a GPU sample {line!r} has {len(values)} fields, not the {len(FIELDS)} of {QUERY}")
        sample = {"timestamp": values[0]}
        sample.update({FIGURES[field]: _reading(value) for field, value in zip(FIELDS[1:], values[1:], strict=True)})
        samples.append(sample)
    return samples


def _spread(values):
    values = [value for value in values if value is not None]
    if not values:
        return None
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def summary(per_node):
    """{node: the sampler's file} -> {node: {samples, sm_clock_mhz, power_w, temperature_c}}, each figure
    {min, median, max} or None where the GPU gave no reading."""
    result = {}
    for node, text in per_node.items():
        samples = parse(text)
        result[node] = {"samples": len(samples), **{figure: _spread(sample[figure] for sample in samples) for figure in FIGURES.values()}}
    return result


def _figure(spread, unit):
    if spread is None:
        return "not read"
    if spread["min"] == spread["max"]:
        return f"{spread['min']:g} {unit}"
    return f"{spread['min']:g}-{spread['max']:g} {unit} (median {spread['median']:g})"


def report_line(nodes):
    """One line per node for the report: clock, power and temperature over the benchmark."""
    if not nodes:
        return "not sampled"
    return "; ".join(
        f"{node}: {figures['samples']} samples, SM clock {_figure(figures['sm_clock_mhz'], 'MHz')}, "
        f"power {_figure(figures['power_w'], 'W')}, temperature {_figure(figures['temperature_c'], 'C')}"
        for node, figures in nodes.items()
    )
