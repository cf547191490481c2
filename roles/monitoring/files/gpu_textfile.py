"""The GPU's clock, power, temperature and use, for the node exporter's textfile collector (docs/monitoring.md).

    gpu_textfile.py NVIDIA_SMI OUT SAMPLES EVERY_S

Run by cron once a minute (the monitoring role's /etc/cron.d/sparkfleet-gpu-textfile): SAMPLES readings EVERY_S
seconds apart, each written to OUT in Prometheus's text format (written beside it, then renamed over it, so the
collector never reads half a file; it reads only names ending in .prom). A reading the GPU does not give ([N/A]: a
GB10's memory, its clock on some drivers) is left out, never written as 0. When nvidia-smi fails, or answers what
cannot be read, OUT holds sparkfleet_gpu_up 0 alone.
"""

import os
import subprocess
import sys
import time

FIELDS = ("index", "clocks.current.sm", "power.draw", "temperature.gpu", "utilization.gpu")
# nvidia-smi's field: the metric, its help, and the factor to the metric's base unit (Prometheus's conventions).
METRICS = {
    "clocks.current.sm": ("sparkfleet_gpu_sm_clock_hertz", "The GPU's SM clock (nvidia-smi clocks.current.sm).", 1e6),
    "power.draw": ("sparkfleet_gpu_power_watts", "The GPU's power draw (nvidia-smi power.draw).", 1.0),
    "temperature.gpu": ("sparkfleet_gpu_temperature_celsius", "The GPU's temperature (nvidia-smi temperature.gpu).", 1.0),
    "utilization.gpu": ("sparkfleet_gpu_utilization_ratio", "The share of time the GPU was busy (nvidia-smi utilization.gpu).", 0.01),
}
UNREAD = ("[N/A]", "N/A", "[Not Supported]", "")
UP = ("# HELP sparkfleet_gpu_up Whether nvidia-smi answered the last query with readings.", "# TYPE sparkfleet_gpu_up gauge")


def exposition(answer):
    """nvidia-smi's CSV answer to FIELDS (no header, no units), or None when it failed -> the textfile's content.

    Raises ValueError, naming the line, on an answer that is not that CSV."""
    if answer is None:
        return "\n".join((*UP, "sparkfleet_gpu_up 0", ""))
    series = {field: [] for field in METRICS}
    for line in answer.splitlines():
        if not line.strip():
            continue
        values = [value.strip() for value in line.split(",")]
        if len(values) != len(FIELDS):
            raise ValueError(f"nvidia-smi answered {line!r}: {len(values)} fields, not the {len(FIELDS)} of {','.join(FIELDS)}")
        reading = dict(zip(FIELDS, values, strict=True))
        for field, (metric, _unused, factor) in METRICS.items():
            if reading[field] in UNREAD:
                continue
            try:
                value = float(reading[field]) * factor
            except ValueError:
                raise ValueError(f"nvidia-smi answered {reading[field]!r} for {field} of GPU {reading['index']}, not a number or [N/A]") from None
            series[field].append(f'{metric}{{gpu="{reading["index"]}"}} {value:g}')
    lines = [*UP, "sparkfleet_gpu_up 1"]
    for field, (metric, help_text, _unused) in METRICS.items():
        if series[field]:
            lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} gauge", *series[field]]
    return "\n".join(lines) + "\n"


def sample(nvidia_smi):
    """One reading of every GPU as the textfile's content."""
    try:
        answer = subprocess.run(
            [nvidia_smi, f"--query-gpu={','.join(FIELDS)}", "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=20, check=False
        )
        return exposition(answer.stdout if answer.returncode == 0 else None)
    except (OSError, subprocess.TimeoutExpired, ValueError) as error:
        sys.stderr.write(f"gpu_textfile: {error}\n")
        return exposition(None)


def main(nvidia_smi, out, samples, every_s):
    for number in range(int(samples)):
        if number:
            time.sleep(float(every_s))
        partial = f"{out}.{os.getpid()}.tmp"
        with open(partial, "w", encoding="utf-8") as kept:
            kept.write(sample(nvidia_smi))
        os.replace(partial, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
