# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""Where a launch's time went: the readiness timeline of one engine.

Every rank's phases are read from the engine's own log lines, stamped by
Docker (``docker logs --timestamps``: RFC 3339 with nanoseconds, UTC), and
from the container's start time; the head adds ``/health`` and the first
streamed token, measured by the caller. Times are seconds after the first
rank's container started (the launch's zero). The same phases hold on a GB10
(weights ~minutes, CUDA graph capture ~minutes) and on the cpu profile.

Pure functions: no Ansible, no Docker; tests feed them recorded logs.
"""

from __future__ import annotations

import datetime
import re

# (key, label, pattern). A phase's time is the LAST matching line of a rank's
# log: vLLM prints some of them once per worker process, and the phase is
# done when the last one is.
RANK_PHASES = (
    ("process_up", "vLLM process up", re.compile(r"\b(?:INFO|WARNING|DEBUG|ERROR) \d\d-\d\d \d\d:\d\d:\d\d")),
    (
        "weights_loaded",
        "weights loaded",
        re.compile(r"Loading weights took|Model loading took|Initializing model took"),
    ),
    (
        "kv_cache_allocated",
        "KV cache allocated",
        re.compile(r"KV cache size: |GiB for KV cache|Available KV cache memory"),
    ),
    (
        "graphs_compiled",
        "graphs captured / compile done",
        re.compile(r"Graph capturing finished|torch\.compile took|init engine \(profile, create kv cache, warmup model\) took"),
    ),
    ("api_up", "API server listening", re.compile(r"Starting vLLM (?:API )?server on|Application startup complete")),
)
# The first of these marks when the process came up, not the last.
FIRST_MATCH = {"process_up"}
# Whether vLLM's torch.compile found its graphs in its cache (docs/warm-boots.md): a graph loaded from the cache
# is warm, one compiled is cold (vLLM 0.32's log lines, vllm/compilation/backends.py and decorators.py).
# torch's own inductor and AOTAutograd cache lines count too where their loggers are on (TORCH_LOGS): vLLM says
# nothing of its cache on a CPU. An AOT artifact that failed to load is compiled again: cold.
COMPILE_WARM = re.compile(
    r"Directly load the compiled graph\(s\) for compile range .* from the cache|Directly load AOT compilation from path"
    r"|fx graph cache hit for key|AOTAutograd cache hit for key"
)
COMPILE_COLD = re.compile(
    r"Compiling a graph for compile range .* takes|Compiling model again due to a load failure"
    r"|fx graph cache miss for key|AOTAutograd cache miss for key"
)

_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)\s?(.*)$")


class TimelineError(ValueError):
    """A rank's record cannot be read (named in the message)."""


def parse_docker_time(text: str) -> float:
    """Seconds since the epoch of a Docker timestamp (``2026-11-30T18:47:19.123456789Z``).

    Docker writes nanoseconds; Python keeps microseconds, which is plenty here.
    Docker's "never started" time (year 1) is refused.
    """
    match = _STAMP.match(text.strip())
    if not match:
        raise TimelineError(f"not a Docker timestamp: {text!r}")
    base, fraction, zone, _unused = match.groups()
    if base.startswith("0001-"):
        raise TimelineError("the container has never started (Docker's zero time)")
    zone = "+00:00" if zone == "Z" else zone
    stamp = datetime.datetime.fromisoformat(base + zone)
    return stamp.timestamp() + (float("0." + fraction) if fraction else 0.0)


def rank_phases(log_text: str) -> dict[str, float]:
    """The epoch time of each phase found in one rank's ``docker logs --timestamps`` output."""
    found: dict[str, float] = {}
    for line in log_text.splitlines():
        match = _STAMP.match(line)
        if not match:
            continue
        message = match.group(4)
        for key, _unused, pattern in RANK_PHASES:
            if key in FIRST_MATCH and key in found:
                continue
            if pattern.search(message):
                found[key] = parse_docker_time(line.split(" ", 1)[0])
    return found


def compile_cache(log_text: str) -> str | None:
    """warm (every graph from vLLM's compile cache), cold (at least one compiled), or None (nothing compiled: eager)."""
    messages = [match.group(4) for match in map(_STAMP.match, log_text.splitlines()) if match]
    if any(COMPILE_COLD.search(message) for message in messages):
        return "cold"
    if any(COMPILE_WARM.search(message) for message in messages):
        return "warm"
    return None


def build_timeline(
    ranks: list[dict],
    engine: str,
    lane: str,
    health_at: float | None,
    first_token_at: float | None,
    first_token_error: str = "",
) -> dict:
    """The timeline of one launch.

    ranks: one dict per rank: ``node``, ``rank`` (0 = head), ``started_at``
    (Docker's State.StartedAt) and ``log`` (``docker logs --timestamps``).
    health_at / first_token_at: epoch seconds measured by the caller (None =
    not reached). Every time in the result is seconds after the first
    container start.
    """
    if not ranks:
        raise TimelineError("no rank to build a timeline from")
    starts = {}
    for item in ranks:
        try:
            starts[item["node"]] = parse_docker_time(str(item["started_at"]))
        except TimelineError as error:
            raise TimelineError(f"{item['node']}: {error}") from None
    zero = min(starts.values())
    rows = []
    for item in sorted(ranks, key=lambda entry: int(entry["rank"])):
        phases = rank_phases(str(item.get("log", "")))
        row = {"node": item["node"], "rank": int(item["rank"]), "container_started": round(starts[item["node"]] - zero, 1)}
        for key, _unused, _unused in RANK_PHASES:
            row[key] = round(phases[key] - zero, 1) if key in phases else None
        row["compile_cache"] = compile_cache(str(item.get("log", "")))
        rows.append(row)
    timeline = {
        "engine": engine,
        "lane": lane,
        "launched_at": datetime.datetime.fromtimestamp(zero, datetime.timezone.utc).isoformat(timespec="seconds"),
        "ranks": rows,
        "health": round(health_at - zero, 1) if health_at is not None else None,
        "first_token": round(first_token_at - zero, 1) if first_token_at is not None else None,
    }
    if first_token_error:
        timeline["first_token_error"] = first_token_error
    timeline["slowest"] = slowest_phase(timeline)
    return timeline


def slowest_phase(timeline: dict) -> dict | None:
    """The longest step of the launch: each phase ends when its last rank reaches it, the phases
    are taken in time order, then /health and the first token, and each step is measured from the
    one before, so the answer says where the wall time went, not which rank was slow.
    """
    steps = [("container_started", "containers started")] + [(key, label) for key, label, _unused in RANK_PHASES]
    points = []
    for key, label in steps:
        times = [row[key] for row in timeline["ranks"] if row.get(key) is not None]
        if times:
            points.append((label, max(times)))
    for key, label in (("health", "/health answered"), ("first_token", "first streamed token")):
        if timeline.get(key) is not None:
            points.append((label, timeline[key]))
    points.sort(key=lambda point: point[1])
    best = None
    previous_label, previous_time = "launch", 0.0
    for label, time in points:
        step = time - previous_time
        if best is None or step > best["seconds"]:
            best = {"from": previous_label, "to": label, "seconds": round(step, 1)}
        previous_label, previous_time = label, time
    return best


def format_timeline(timeline: dict) -> list[str]:
    """The table the engine role prints and status.yml shows again (seconds after the first container start)."""
    columns = ["container_started"] + [key for key, _unused, _unused in RANK_PHASES]
    headers = {
        "container_started": "container",
        "process_up": "process",
        "weights_loaded": "weights",
        "kv_cache_allocated": "KV cache",
        "graphs_compiled": "graphs/compile",
        "api_up": "API",
    }
    width = max(len(row["node"]) for row in timeline["ranks"]) + len(" (rank 0)")
    lines = [
        f"readiness of engine {timeline['engine']}, lane {timeline['lane']}, launched {timeline['launched_at']}"
        " (seconds after the first container started; - = no such line in that rank's log)",
        "rank".ljust(width) + "".join(headers[key].rjust(15) for key in columns) + "compile cache".rjust(15),
    ]
    for row in timeline["ranks"]:
        label = f"{row['node']} (rank {row['rank']})".ljust(width)
        cells = "".join(("-" if row[key] is None else f"{row[key]:.1f}").rjust(15) for key in columns)
        lines.append(label + cells + (row.get("compile_cache") or "-").rjust(15))
    health = "-" if timeline.get("health") is None else f"{timeline['health']:.1f} s"
    first = "-" if timeline.get("first_token") is None else f"{timeline['first_token']:.1f} s"
    tail = f"/health answered at {health}; first streamed token at {first}"
    if timeline.get("first_token_error"):
        tail += f" ({timeline['first_token_error']})"
    lines.append(tail)
    slowest = timeline.get("slowest")
    if slowest:
        lines.append(f"longest step: {slowest['from']} -> {slowest['to']}, {slowest['seconds']:.1f} s")
    return lines
