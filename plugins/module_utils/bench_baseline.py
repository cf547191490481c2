# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""The previous smoke benchmark at this site as a regression baseline.

Every run writes a summary (each wave's medians, with what was measured: lane, profile, the scenarios'
definitions, the engine's attestation) beside its report; the next run of the same engine and lane
compares its waves with it, figure by figure, under a tolerance per figure (data: the profile's
bench.baseline_tolerance). Only like with like is compared: the same profile, the same scenario
definition and concurrency. The comparison is reported; the role gates on it only when asked
(smoke_bench_baseline_gate), since on a shared or loaded machine it is a timing.
Pure Python, no Ansible imports.
"""

from __future__ import annotations

import hashlib
import json

SUMMARY_VERSION = 1
# Figure -> which way is worse: "max" figures (seconds) regress upwards, "min" figures (rates) downwards.
FIGURES = {"ttft_content_s": "max", "e2e_s": "max", "decode_tps": "min", "prefill_tps": "min"}
LABELS = {"ttft_content_s": "TTFT content", "e2e_s": "E2E", "decode_tps": "decode", "prefill_tps": "prefill"}
UNITS = {"ttft_content_s": "s", "e2e_s": "s", "decode_tps": "tok/s", "prefill_tps": "tok/s"}


class BaselineError(ValueError):
    """A tolerance or a baseline file that cannot be used, with what to do."""


def scenario_sha(definition: dict) -> str:
    """What a scenario asks (prompt, sizes, thinking): two runs are compared only where it is the same."""
    return hashlib.sha256(json.dumps(definition, sort_keys=True, default=str).encode()).hexdigest()[:16]


def checked_tolerance(tolerance) -> dict:
    """Figure -> fraction it may be worse than the baseline (0.25: times up to 1.25x, rates down to 0.75x)."""
    if not isinstance(tolerance, dict) or not tolerance:
        raise BaselineError(
            f"baseline tolerance {tolerance!r} is not a mapping of figure to fraction; use e.g. "
            "{ttft_content_s: 0.25, e2e_s: 0.25, decode_tps: 0.2, prefill_tps: 0.25} (profiles[PROFILE].bench.baseline_tolerance)"
        )
    checked = {}
    for figure, value in tolerance.items():
        if figure not in FIGURES:
            raise BaselineError(f"baseline tolerance names {figure!r}, which is no compared figure; use one of {', '.join(FIGURES)}")
        try:
            fraction = float(value)
        except (TypeError, ValueError):
            raise BaselineError(f"baseline tolerance {figure}: {value!r} is not a number; use a fraction such as 0.25") from None
        if fraction < 0 or (FIGURES[figure] == "min" and fraction >= 1):
            bound = "at least 0" + (" and below 1 (a rate cannot fall by 100% or more)" if FIGURES[figure] == "min" else "")
            raise BaselineError(f"baseline tolerance {figure}: {value!r} must be {bound}, e.g. 0.25")
        checked[figure] = fraction
    return checked


def summary(waves: list[dict], identity: dict, definitions: dict) -> dict:
    """What the next run compares with: each wave's medians and the run's identity (lane, profile, engine)."""
    return {
        "version": SUMMARY_VERSION,
        "identity": identity,
        "scenarios": {name: scenario_sha(definition) for name, definition in definitions.items()},
        "waves": [
            {"scenario": wave["scenario"], "concurrency": wave["concurrency"], "ok": wave.get("ok"), **{figure: wave.get(figure) for figure in FIGURES}}
            for wave in waves
        ],
    }


def loaded(text: str, source: str) -> dict:
    """A summary file as written by summary(); a file of another shape is named, not half-read."""
    try:
        data = json.loads(text)
    except ValueError as error:
        raise BaselineError(f"baseline {source} is not JSON ({error}); move it away or set smoke_bench_baseline_file to another report's summary") from None
    if not isinstance(data, dict) or data.get("version") != SUMMARY_VERSION or not isinstance(data.get("waves"), list):
        raise BaselineError(
            f"baseline {source} is not a benchmark summary of version {SUMMARY_VERSION} (written by the smoke_bench role); "
            "move it away or set smoke_bench_baseline_file to another one"
        )
    return data


def compare(waves: list[dict], definitions: dict, identity: dict, baseline: dict | None, tolerance: dict) -> dict:
    """This run's waves against the baseline's: rows for the report and the regressions beyond tolerance.

    Returns {"compared": bool, "why_not": str, "rows": [...], "regressions": [...], "differs": [...]}.
    """
    result = {"compared": False, "why_not": "", "rows": [], "regressions": [], "differs": []}
    if not baseline:
        result["why_not"] = "no earlier run of this engine and lane at this site"
        return result
    before = baseline.get("identity") or {}
    if before.get("profile") != identity.get("profile"):
        result["why_not"] = f"the earlier run measured profile {before.get('profile')!r}, this one {identity.get('profile')!r}"
        return result
    # What else changed is said, not refused: a new image or new flags is what a baseline is for.
    result["differs"] = [key for key in sorted(set(before) | set(identity)) if key != "time" and before.get(key) != identity.get(key)]
    tolerance = checked_tolerance(tolerance)
    shas = {name: scenario_sha(definition) for name, definition in definitions.items()}
    previous = {
        (w["scenario"], int(w["concurrency"])): w for w in baseline["waves"] if (baseline.get("scenarios") or {}).get(w["scenario"]) == shas.get(w["scenario"])
    }
    for wave in waves:
        old = previous.get((wave["scenario"], int(wave["concurrency"])))
        if old is None:
            continue
        for figure, worse in FIGURES.items():
            now, then = wave.get(figure), old.get(figure)
            if now is None or then is None or then <= 0:
                continue
            ratio = now / then
            allowed = tolerance.get(figure)
            regressed = allowed is not None and (now > then * (1 + allowed) if worse == "max" else now < then * (1 - allowed))
            row = {"scenario": wave["scenario"], "concurrency": wave["concurrency"], "figure": figure, "previous": then, "now": now, "ratio": ratio,
                   "tolerance": allowed, "regressed": regressed}  # fmt: skip
            result["rows"].append(row)
            if regressed:
                result["regressions"].append(
                    f"{wave['scenario']} at concurrency {wave['concurrency']}: {LABELS[figure]} {now:.3f} {UNITS[figure]} is {ratio:.2f}x the previous "
                    f"run's {then:.3f} (tolerance {'+' if worse == 'max' else '-'}{allowed:.0%})"
                )
    result["compared"] = bool(result["rows"])
    if not result["compared"]:
        result["why_not"] = "the earlier run measured no scenario of this one with the same definition and concurrency"
    return result


def markdown_lines(comparison: dict, source: str | None) -> list[str]:
    """The report's section: the previous run named, what differs from it, and each figure's change."""
    lines = ["", "## Against the previous run at this site", ""]
    if not comparison["compared"]:
        return [*lines, f"Not compared: {comparison['why_not']}."]
    lines += [f"Baseline: {source or 'the previous run'}."]
    if comparison["differs"]:
        lines += [f"What differs from it: {', '.join(comparison['differs'])} (a regression may come from that change)."]
    lines += ["", "| scenario | conc | figure | previous | now | now / previous | tolerance | |", "|---|---|---|---|---|---|---|---|"]
    for row in comparison["rows"]:
        allowed = "-" if row["tolerance"] is None else f"{'+' if FIGURES[row['figure']] == 'max' else '-'}{row['tolerance']:.0%}"
        lines.append(
            f"| {row['scenario']} | {row['concurrency']} | {LABELS[row['figure']]} ({UNITS[row['figure']]}) | {row['previous']:.3f} | {row['now']:.3f} "
            f"| {row['ratio']:.2f} | {allowed} | {'REGRESSED' if row['regressed'] else 'ok'} |"
        )
    lines += ["", f"Regressions beyond tolerance: {len(comparison['regressions'])}."]
    return lines
