# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Read nvidia-smi's outputs: the default table and --query-gpu CSV.

A GB10 (DGX Spark) has no memory of its own: nvidia-smi prints
`Not Supported` in the table and `[N/A]` in CSV memory fields. Those are
returned as None ("not reported"), never as zero, so callers can tell a
unified-memory device from an empty one and read /proc/meminfo instead.
Pure Python, no Ansible imports.
"""

from __future__ import annotations

import re

NOT_REPORTED_MARKERS = frozenset({"[N/A]", "N/A", "Not Supported", "[Not Supported]", "[Insufficient Permissions]", ""})
_MIB = 1024 * 1024
_UNIT_FACTORS = {"MiB": _MIB, "GiB": 1024 * _MIB, "KiB": 1024, "B": 1}


class NvidiaSmiError(ValueError):
    """Output that is not what nvidia-smi prints."""


def _value(raw, unit_from_header=None):
    """A CSV cell -> int/float/str, or None when the device does not report it."""
    text = raw.strip()
    if text in NOT_REPORTED_MARKERS:
        return None
    match = re.fullmatch(r"(-?\d+(?:\.\d+)?)\s*(MiB|GiB|KiB|B|MHz|W|%|C)?", text)
    if not match:
        return text
    number = float(match.group(1))
    unit = match.group(2) or unit_from_header
    if unit in _UNIT_FACTORS:
        return int(number * _UNIT_FACTORS[unit])
    return int(number) if number.is_integer() and "." not in match.group(1) else number


def parse_query_csv(text, fields=None):
    """Parse `nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`.

    With a header, field names and units come from it (`memory.total [MiB]`).
    Without one (noheader), pass `fields` in query order; memory fields are
    then taken as MiB (nvidia-smi's unit for them with nounits).
    Memory values are returned in bytes; a field the GPU does not report is None.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise NvidiaSmiError("nvidia-smi printed nothing: is the driver loaded (nvidia-smi -L)?")
    header = None
    if fields is None:
        header, lines = lines[0], lines[1:]
        names, units = [], []
        for column in header.split(","):
            match = re.fullmatch(r"\s*([\w.]+)(?:\s*\[(\w+|%)\])?\s*", column)
            if not match:
                raise NvidiaSmiError(f"not a --query-gpu CSV header: {header!r}")
            names.append(match.group(1))
            units.append(match.group(2))
    else:
        names = list(fields)
        units = ["MiB" if name.startswith("memory.") else None for name in names]
    rows = []
    for line in lines:
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != len(names):
            raise NvidiaSmiError(f"{len(cells)} values for {len(names)} fields in {line!r}")
        rows.append({name: _value(cell, unit) for name, cell, unit in zip(names, cells, units, strict=True)})
    return rows


_TABLE_VERSIONS = re.compile(r"Driver Version:\s*([\d.]+)\s+CUDA Version:\s*([\d.]+)")
_TABLE_GPU = re.compile(r"^\|\s+(\d+)\s+(.+?)\s{2,}(On|Off)\s+\|")
_TABLE_MEMORY = re.compile(r"^\|.*?\|\s*(?:(\d+)MiB\s*/\s*(\d+)MiB|(Not Supported|N/A))\s*\|")


def parse_table(text):
    """Parse the default `nvidia-smi` table: driver, CUDA and each GPU's memory.

    Returns {"driver_version", "cuda_version", "gpus": [{index, name, memory_used, memory_total}]},
    memory in bytes, None where the table says `Not Supported` (GB10).
    """
    versions = _TABLE_VERSIONS.search(text)
    if not versions:
        raise NvidiaSmiError("no 'Driver Version' in the nvidia-smi table: is this nvidia-smi's output?")
    gpus = []
    lines = text.splitlines()
    for number, line in enumerate(lines):
        gpu = _TABLE_GPU.match(line)
        if not gpu or number + 1 >= len(lines):
            continue
        memory = _TABLE_MEMORY.match(lines[number + 1])
        used = total = None
        if memory and memory.group(1) is not None:
            used, total = int(memory.group(1)) * _MIB, int(memory.group(2)) * _MIB
        gpus.append({"index": int(gpu.group(1)), "name": gpu.group(2).strip(), "memory_used": used, "memory_total": total})
    return {"driver_version": versions.group(1), "cuda_version": versions.group(2), "gpus": gpus}


def version_tuple(version):
    """'580.126.09' -> (580, 126, 9), for comparing driver versions."""
    if not re.fullmatch(r"\d+(\.\d+)*", str(version)):
        raise NvidiaSmiError(f"{version!r} is not a driver version")
    return tuple(int(part) for part in str(version).split("."))


def memory_is_unified(gpus):
    """True when every GPU leaves its memory unreported (GB10 / unified memory)."""
    return bool(gpus) and all(gpu.get("memory.total", gpu.get("memory_total")) is None for gpu in gpus)
