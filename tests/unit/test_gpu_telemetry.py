"""The GPU's clock, power and temperature during the smoke benchmark (plugins/module_utils/gpu_telemetry.py), from
nvidia-smi's CSV as a GB10 answers it (tests/data/gpu/gb10/query-memory-util-power.csv: power and temperature read,
memory [N/A])."""

from __future__ import annotations

import pathlib
import re

import pytest
import yaml

from ansible_collections.sparkfleet.vllm.plugins.module_utils import gpu_telemetry

GB10 = pathlib.Path(__file__).parents[1] / "data/gpu/gb10/query-memory-util-power.csv"


def _gb10_reading():
    """The recorded GB10 answer's power and temperature, as the sampler's query would print them (nounits)."""
    header, values = GB10.read_text().splitlines()
    recorded = dict(zip((name.split(" [")[0].strip() for name in header.split(",")), (value.strip() for value in values.split(",")), strict=True))
    return recorded["power.draw"].split()[0], recorded["temperature.gpu"]


def test_the_samples_of_each_node_become_its_spread_and_a_gb10s_missing_clock_is_not_read():
    power, temperature = _gb10_reading()
    assert (power, temperature) == ("11.17", "35")
    idle = f"2026/12/04 02:40:00.000, [N/A], {power}, {temperature}"
    busy = "2026/12/04 02:40:01.000, 2418, 38.50, 41"
    nodes = gpu_telemetry.summary({"spark1": "\n".join([idle, busy, ""]), "spark2": idle})
    assert nodes["spark1"] == {
        "samples": 2,
        "sm_clock_mhz": {"min": 2418.0, "median": 2418.0, "max": 2418.0},
        "power_w": {"min": 11.17, "median": 24.835, "max": 38.5},
        "temperature_c": {"min": 35.0, "median": 38.0, "max": 41.0},
    }
    assert nodes["spark2"]["sm_clock_mhz"] is None
    assert gpu_telemetry.report_line(nodes) == (
        "spark1: 2 samples, SM clock 2418 MHz, power 11.17-38.5 W (median 24.835), temperature 35-41 C (median 38); "
        "spark2: 1 samples, SM clock not read, power 11.17 W, temperature 35 C"
    )


def test_a_node_without_samples_and_a_line_that_is_no_sample():
    assert gpu_telemetry.summary({"spark3": ""}) == {"spark3": {"samples": 0, "sm_clock_mhz": None, "power_w": None, "temperature_c": None}}
    assert gpu_telemetry.report_line({}) == "not sampled"
    with pytest.raises(gpu_telemetry.TelemetryError, match=re.escape("has 2 fields, not the 4 of timestamp,clocks.current.sm,power.draw,temperature.gpu")):
        gpu_telemetry.parse("2026/12/04 02:40:00.000, 12")
    with pytest.raises(gpu_telemetry.TelemetryError, match="nvidia-smi answered 'hot' where a number or"):
        gpu_telemetry.parse("2026/12/04 02:40:00.000, 1, 2, hot")


def test_the_role_asks_nvidia_smi_what_the_parser_reads():
    role_vars = yaml.safe_load((pathlib.Path(__file__).parents[2] / "roles/smoke_bench/vars/main.yml").read_text())
    assert role_vars["smoke_bench_gpu_query"] == gpu_telemetry.QUERY
