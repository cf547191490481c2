"""roles/monitoring/files/gpu_textfile.py: nvidia-smi's readings as the node exporter's textfile, on the recorded
answers of a GB10 (tests/data/gpu/gb10: power, temperature and use read, no clock) and an H200 (its SM clocks), and
checked by the distribution's `promtool check metrics`."""

from __future__ import annotations

import importlib.util
import pathlib
import re
import shutil
import subprocess

import pytest

DATA = pathlib.Path(__file__).parents[1] / "data/gpu"
SCRIPT = pathlib.Path(__file__).parents[2] / "roles/monitoring/files/gpu_textfile.py"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
_spec = importlib.util.spec_from_file_location("gpu_textfile", SCRIPT)
gpu_textfile = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpu_textfile)


def _recorded(path):
    """A recorded `--format=csv` answer as {field: value without its unit}, one per GPU."""
    header, *rows = path.read_text().splitlines()
    names = [name.split(" [")[0].strip() for name in header.split(",")]
    return [{name: value.strip().split(" ")[0] for name, value in zip(names, row.split(","), strict=True)} for row in rows]


def _answer(readings):
    """The textfile query's answer (no header, no units) for those readings; what a GPU did not record is [N/A]."""
    return "".join(", ".join(reading.get(field, "[N/A]") for field in gpu_textfile.FIELDS) + "\n" for reading in readings)


def _promtool_checks(text):
    checked = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_gb10s_reading_has_its_power_temperature_and_use_and_no_clock():
    (gb10,) = _recorded(DATA / "gb10/query-memory-util-power.csv")
    text = gpu_textfile.exposition(_answer([dict(gb10, index="0")]))
    assert 'sparkfleet_gpu_power_watts{gpu="0"} 11.17\n' in text
    assert 'sparkfleet_gpu_temperature_celsius{gpu="0"} 35\n' in text
    assert 'sparkfleet_gpu_utilization_ratio{gpu="0"} 0\n' in text
    assert "sparkfleet_gpu_up 1\n" in text
    assert "sparkfleet_gpu_sm_clock_hertz" not in text  # [N/A] is left out, never 0
    _promtool_checks(text)


def test_an_h200s_clocks_are_in_hertz_one_series_per_gpu():
    readings = _recorded(DATA / "h200-x2/query-gpu.csv")
    text = gpu_textfile.exposition(_answer(readings))
    assert re.findall(r'^sparkfleet_gpu_sm_clock_hertz\{gpu="(\d)"\} (\S+)$', text, re.M) == [("0", "3.45e+08"), ("1", "3.45e+08")]
    assert text.count("# TYPE sparkfleet_gpu_sm_clock_hertz gauge") == 1
    _promtool_checks(text)


def test_a_failed_nvidia_smi_says_so_and_nothing_else():
    text = gpu_textfile.exposition(None)
    assert text.splitlines()[-1] == "sparkfleet_gpu_up 0"
    assert "sparkfleet_gpu_power" not in text
    _promtool_checks(text)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ("0, 2418, 38.5\n", "3 fields, not the 5 of index,clocks.current.sm"),
        ("0, 2418, 38.5, hot, 12\n", "'hot' for temperature.gpu of GPU 0, not a number or [N/A]"),
    ],
)
def test_an_answer_that_is_not_the_query_is_named(answer, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        gpu_textfile.exposition(answer)


def test_each_sample_replaces_the_textfile_whole(tmp_path):
    """main() as cron runs it, against an nvidia-smi that is not there: the file says so, no partial file is left."""
    out = tmp_path / "sparkfleet_gpu.prom"
    assert gpu_textfile.main(str(tmp_path / "no-nvidia-smi"), str(out), "2", "0") == 0
    assert out.read_text().splitlines()[-1] == "sparkfleet_gpu_up 0"
    assert [path.name for path in tmp_path.iterdir()] == ["sparkfleet_gpu.prom"]
