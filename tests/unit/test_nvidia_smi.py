"""nvidia-smi parsers on real outputs: an H200 (discrete, captured) and a GB10 (unified, published)."""

from __future__ import annotations

import pathlib

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import nvidia_smi as smi

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "data/gpu"  # copies of ../shared/fixtures/gpu
MIB = 1024 * 1024


def fixture(name):
    return (FIXTURES / name).read_text()


def test_h200_csv_with_header_reads_real_numbers():
    rows = smi.parse_query_csv(fixture("h200-x2/query-gpu.csv"))
    assert len(rows) == 2
    first = rows[0]
    assert first["name"] == "NVIDIA H200"
    assert first["driver_version"] == "580.159.04"
    assert first["memory.total"] == 143771 * MIB
    assert first["memory.used"] == 0
    assert first["memory.free"] == 143156 * MIB
    assert first["clocks.current.sm"] == 345
    assert first["clocks.max.sm"] == 1980
    assert first["compute_cap"] == 9.0
    assert first["pstate"] == "P0"
    assert not smi.memory_is_unified(rows)


def test_h200_csv_noheader_nounits():
    rows = smi.parse_query_csv(fixture("h200-x2/query-gpu-nounits.csv"), fields=["index", "memory.total", "memory.used", "memory.free"])
    assert [row["index"] for row in rows] == [0, 1]
    assert rows[1]["memory.total"] == 143771 * MIB
    assert rows[1]["memory.free"] == 143156 * MIB


def test_h200_table():
    table = smi.parse_table(fixture("h200-x2/nvidia-smi.txt"))
    assert table["driver_version"] == "580.159.04"
    assert table["cuda_version"] == "13.0"
    assert [gpu["index"] for gpu in table["gpus"]] == [0, 1]
    assert table["gpus"][0]["name"] == "NVIDIA H200"
    assert table["gpus"][0]["memory_total"] == 143771 * MIB
    assert table["gpus"][0]["memory_used"] == 0


def test_gb10_table_memory_is_not_supported_not_zero():
    table = smi.parse_table(fixture("gb10/nvidia-smi.txt"))
    assert table["driver_version"] == "580.126.09"
    assert table["cuda_version"] == "13.0"
    (gpu,) = table["gpus"]
    assert gpu["name"] == "NVIDIA GB10"
    assert gpu["memory_total"] is None
    assert gpu["memory_used"] is None
    assert smi.memory_is_unified(table["gpus"])


def test_gb10_csv_noheader_memory_fields_are_none():
    rows = smi.parse_query_csv(fixture("gb10/query-index-name-memory-nounits.csv"), fields=["index", "name", "memory.total", "memory.used", "memory.free"])
    assert rows == [{"index": 0, "name": "NVIDIA GB10", "memory.total": None, "memory.used": None, "memory.free": None}]
    assert smi.memory_is_unified(rows)


def test_gb10_csv_with_header_keeps_the_fields_it_does_report():
    (row,) = smi.parse_query_csv(fixture("gb10/query-memory-util-power.csv"))
    assert row["memory.total"] is None
    assert row["memory.free"] is None
    assert row["utilization.gpu"] == 0
    assert row["power.draw"] == 11.17
    assert row["temperature.gpu"] == 35


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "nvidia-smi printed nothing"),
        ("index, name\n0, GB10, extra\n", "3 values for 2 fields"),
        ("Failed to initialize NVML: Driver/library version mismatch\n", "not a --query-gpu CSV header"),
    ],
)
def test_bad_csv(text, message):
    with pytest.raises(smi.NvidiaSmiError, match=message):
        smi.parse_query_csv(text)


def test_driver_versions_compare_numerically():
    assert smi.version_tuple("580.126.09") > smi.version_tuple("580.95")
    assert smi.version_tuple("580.95.05") >= smi.version_tuple("580.95")
    assert smi.version_tuple("575.57.08") < smi.version_tuple("580.95")
    with pytest.raises(smi.NvidiaSmiError):
        smi.version_tuple("[N/A]")
