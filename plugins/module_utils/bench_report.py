# Copyright: sparkfleet developers
# Apache License 2.0 (see galaxy.yml)
"""The smoke benchmark's report: Markdown laid out like the recipe's BENCH.md, and a PNG plot."""

from __future__ import annotations

from ansible_collections.sparkfleet.vllm.plugins.module_utils.bench_baseline import markdown_lines as baseline_lines
from ansible_collections.sparkfleet.vllm.plugins.module_utils.stream_bench import cell, cross_check_line, reference_row

# (header, wave key, format). ttft_content_s and recipe_decode_tps are the recipe's definitions,
# so they sit next to the published reference columns.
MARKDOWN_COLUMNS = (
    ("conc", "concurrency", "{}"),
    ("ok", "ok", "{}"),
    ("TTFT any (s)", "ttft_s", "{:.3f}"),
    ("TTFT content (s)", "ttft_content_s", "{:.3f}"),
    ("E2E (s)", "e2e_s", "{:.3f}"),
    ("decode (tok/s)", "decode_tps", "{:.1f}"),
    ("content decode (tok/s)", "content_decode_tps", "{:.1f}"),
    ("recipe decode (tok/s)", "recipe_decode_tps", "{:.1f}"),
    ("prefill (tok/s)", "prefill_tps", "{:.0f}"),
    ("prompt tok", "prompt_tokens", "{:.0f}"),
    ("tok/chunk", "tokens_per_chunk", "{:.2f}"),
    ("gap p50/p99 (ms)", None, None),
)
REFERENCE_COLUMNS = (("ref TTFT (s)", "ttft_s"), ("ref E2E (s)", "e2e_s"), ("ref decode (tok/s)", "decode_tps"), ("ref prefill (tok/s)", "prefill_tps"))


def _row(wave: dict, reference: dict | None) -> list[str]:
    cells = []
    for _unused, key, fmt in MARKDOWN_COLUMNS:
        if key is None:
            cells.append(f"{cell(wave.get('gap_p50_ms'), '{:.0f}')}/{cell(wave.get('gap_p99_ms'), '{:.0f}')}")
        else:
            cells.append(cell(wave.get(key), fmt))
    if reference is not None:
        row = reference_row(reference, wave["scenario"], wave["concurrency"]) or {}
        cells += [cell(row.get(key), "{}") for _unused, key in REFERENCE_COLUMNS]
    return cells


def markdown(
    title: str,
    facts: dict,
    waves: list[dict],
    skipped: list[dict],
    missed: list[str],
    reference: dict | None,
    reference_source: str | None,
    comparison: dict | None = None,
    baseline_source: str | None = None,
) -> str:
    lines = [f"# {title}", ""]
    lines += [f"- {key}: {value}" for key, value in facts.items()]
    lines += [
        "",
        "TTFT any = first token of any kind (reasoning, content, tool call); TTFT content = first content token",
        "(the recipe's TTFT). Decode = tokens after the first / time after the first; content decode = the same over",
        "content only; recipe decode = completion tokens / (E2E - TTFT content), the recipe's figure (inflated when",
        "thinking is on). Medians over the wave's successful requests.",
    ]
    if reference is not None:
        lines += ["", f"Reference columns: the published figures of {reference_source or 'the reference'} (recipe definitions)."]
    headers = [header for header, _unused, _unused in MARKDOWN_COLUMNS] + ([h for h, _unused in REFERENCE_COLUMNS] if reference is not None else [])
    for scenario in dict.fromkeys(wave["scenario"] for wave in waves):
        lines += ["", f"## {scenario}", "", "| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
        lines += ["| " + " | ".join(_row(wave, reference)) + " |" for wave in waves if wave["scenario"] == scenario]
        spec = next((w for w in waves if w["scenario"] == scenario and w.get("spec_decode_mean_accepted_length") is not None), None)
        if spec:
            lines += [
                "",
                f"Speculative decoding: mean accepted length {spec['spec_decode_mean_accepted_length']:.2f}, "
                f"acceptance {spec['spec_decode_acceptance_rate']:.2f}.",
            ]
        checked = next((w for w in waves if w["scenario"] == scenario and cross_check_line(w)), None)
        if checked:
            lines += ["", cross_check_line(checked)]
        reruns = [f"- x{w['concurrency']}: {w['rerun']}" for w in waves if w["scenario"] == scenario and w.get("rerun")]
        if reruns:
            lines += ["", "Waves run twice:", *reruns]
        errors = [f"- x{w['concurrency']}: HTTP {e['status'] or '-'}: {e['error']}" for w in waves if w["scenario"] == scenario for e in w.get("errors", ())]
        if errors:
            lines += ["", "Errors:", *errors]
    if skipped:
        lines += ["", "## Skipped", ""] + [f"- {entry['scenario']}: {entry['reason']}" for entry in skipped]
    if comparison is not None:
        lines += baseline_lines(comparison, baseline_source)
    lines += ["", "## Thresholds", ""]
    lines += [f"- MISSED: {text}" for text in missed] or ["- all met"]
    return "\n".join(lines) + "\n"


def plot(path: str, title: str, waves: list[dict]) -> None:
    """TTFT (any and content) and decode rate against concurrency, one line per scenario."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, (ttft_axes, decode_axes) = pyplot.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    for scenario in dict.fromkeys(wave["scenario"] for wave in waves):
        rows = [w for w in waves if w["scenario"] == scenario]
        levels = [w["concurrency"] for w in rows]
        (line,) = ttft_axes.plot(levels, [w["ttft_s"] for w in rows], marker="o", label=f"{scenario} (first token)")
        if any(w["ttft_content_s"] is not None and w["ttft_content_s"] != w["ttft_s"] for w in rows):
            ttft_axes.plot(levels, [w["ttft_content_s"] for w in rows], marker="x", linestyle="--", color=line.get_color(), label=f"{scenario} (first content)")
        decode_axes.plot(levels, [w["decode_tps"] for w in rows], marker="o", label=scenario)
    ttft_axes.set(title="Time to first token", xlabel="concurrent streams", ylabel="seconds (median)")
    decode_axes.set(title="Decode rate per stream", xlabel="concurrent streams", ylabel="tokens/s (median)")
    for axes in (ttft_axes, decode_axes):
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
        axes.xaxis.get_major_locator().set_params(integer=True)
        axes.set_ylim(bottom=0)
    figure.suptitle(title)
    figure.savefig(path, dpi=110)
    pyplot.close(figure)
