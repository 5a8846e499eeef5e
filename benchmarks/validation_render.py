"""The validation's report as text: the table of points, the summaries and the orderings.

Why a module of its own: ``benchmarks/validate_emulator.py`` scores and is the command; how its report reads (the
rows, the signs spelled out, the summary rows ``--ablate`` shares) is this.
"""

from __future__ import annotations

from typing import Any

from validation_classes import CLASS_AXES


def render(report: Any) -> str:
    """The command's text: every point in its source's fold beside its in-sample error, the folds' constants, the
    summaries per source and per class, the orderings, the bounds and the goals (``report``: a
    :class:`validation_report.Report`)."""
    fit = {o.point["id"]: o for o in report.outcomes}
    lines = [
        "Each source predicted with every constant derived without it (leave one source out). A point's error is "
        "(predicted - measured) / measured of the quantity as published, with its direction in words; the "
        "summaries' signed errors: + = predicted too fast.",
        "",
        "| point | source | measured | predicted | error (as published) | in sample (fit) | how |",
        "|---|---|---:|---:|---|---:|---|",
    ]
    for o in report.out_of_sample:
        p = o.point
        lines.append(
            f"| {p['id']} | {p['source']} | {p['measured']:,.4g} {p['unit']} | {o.predicted:,.4g} | "
            f"{o.describe()} | {fit[p['id']].error:+.1%} | {o.note} |"
        )
    for o in report.outcomes:
        if o.point.get("role") == "calibrate":
            p = o.point
            lines.append(
                f"| {p['id']} (calibration, not scored) | {p['source']} | {p['measured']:,.4g} {p['unit']} | "
                f"{o.predicted:,.4g} | | {o.error:+.1%} | {o.note} |"
            )
    s = report.summary()
    lines += ["", "Folds: the constants a held-out source changes (every other constant keeps its written value)."]
    for source, changes in s["folds"].items():
        lines.append(f"* without {source}: " + ("; ".join(changes) if changes else "no constant comes from it"))
    lines += ["", "Out of sample (leave one source out): the figure of merit", "", SUMMARY_HEAD, SUMMARY_RULE]
    lines += [summary_row(src, v) for src, v in s["per_source"].items()]
    lines.append(summary_row("**all**", s["overall"]))
    w = s["source_weighted"]
    lines.append(
        f"| each source once (median of the {w['sources']} medians) | | {w['median']:.1%} | "
        f"{w['signed_median']:+.1%} | |"
    )
    for axis in CLASS_AXES:
        lines += [
            "",
            f"| {axis} (out of sample) | points | median abs. error | median signed error | worst error | sources |",
            "|---|---:|---:|---:|---:|---|",
        ]
        for name, v in s["per_class"][axis].items():
            lines.append(summary_row(name, v) + f" {', '.join(v['sources'])} |")
    f = s["in_sample_fit"]["overall"]
    lines += [
        "",
        f"in sample (fit): median abs. error {f['median']:.1%}, median signed error {f['signed_median']:+.1%} over "
        f"{f['points']} points (every constant from every source, its own included)",
    ]
    lines += ["", "| ordering | right | detail |", "|---|---|---|"]
    lines += [f"| {c['what']} | {'yes' if c['right'] else 'NO'} | {c['detail']} |" for c in s["orderings"]]
    lines += [
        "",
        f"checks (bounds, out of sample): {s['checks']}",
        f"goals (not asserted, out of sample): {s['goals']}",
    ]
    lines.append(f"({report.seconds:.1f} s)")
    return "\n".join(lines)


#: a summary table's head and rule (the sources', and ``--ablate``'s with its own first column)
SUMMARY_HEAD = "| source | points | median abs. error | median signed error | worst error |"
SUMMARY_RULE = "|---|---:|---:|---:|---:|"


def summary_row(name: str, v: dict[str, Any]) -> str:
    """One row of a summary table: points, median absolute and signed error, the worst (signed)."""
    return f"| {name} | {v['points']} | {v['median']:.1%} | {v['signed_median']:+.1%} | {v['worst_signed']:+.1%} |"
