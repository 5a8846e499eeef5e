"""The report's "Sensitivity of the timing verdicts" section (``--sensitivity``).

A timing verdict is only as firm as the estimated hardware figures it rests on. This section puts,
for every timing claim, the verdict at the central values beside the share of plausible settings
in which it holds, the figure that decides it and the value at which it flips; then the figures
(share, tornado, heat map), the table of uncertain figures with the reasons for their bounds, and
what was held fixed. It opens with the check that makes the rest trustworthy: the analytical
times against the runs' own emulated times at the central values.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from distrepro.claims.stats import fmt
from distrepro.report.dependence_section import share_text
from distrepro.report.figures import figure_style as common
from distrepro.report.figures.sensitivity_figures import heatmap_figure, share_figure, tornado_figure
from distrepro.report.sections import table
from distrepro.safe_write import write_text, write_with

FIGURES = {
    "share": ("sensitivity_share.png", share_figure, "Verdicts over the plausible settings"),
    "tornado": ("sensitivity_tornado.png", tornado_figure, "Tornado: each uncertain figure at its range ends"),
    "heat": ("sensitivity_heatmap.png", heatmap_figure, "Verdict over the two most influential figures"),
}
_CAPTIONS = {
    "share": "Share of Latin-hypercube settings in which each timing claim PASSes, FAILs or is INCONCLUSIVE; "
    "right: the verdict at the profiles' central values.",
    "tornado": "The claim's statistic with one figure at the low (blue) or high (orange) end of its range, all others "
    "central; widest first (at most 8; figures without effect left out). Black line: central value; green: "
    "acceptance band.",
    "heat": "Verdict (colour) and statistic (contours) over the two figures with the widest tornado bars, others "
    "central; star: central values.",
}


def draw(result: Any, fig_dir: Path) -> dict[str, Path]:
    """Save the section's figures; keys of :data:`FIGURES` for those that have something to show."""
    out = {}
    for key, (name, fn, _) in FIGURES.items():
        fig = fn(result)
        if fig is not None:
            out[key] = common.save(fig, fig_dir / name, fig_dir.parent)
    return out


def _flip_text(c: Any, space: Any) -> str:
    if not c.flips:
        return "none within the ranges (one at a time)"
    parts = []
    for f in sorted(c.flips, key=lambda f: [b.variable for b in c.tornado].index(f.variable))[:3]:
        var = space[f.variable]
        if var.choices:  # categorical: no "rises past", the verdict under each choice
            before = var.describe(f.value - 1)
            parts.append(f"{f.below} with {f.variable} = {before}, {f.above} with {var.describe(f.value)}")
        else:
            parts.append(f"{f.below} → {f.above} as {f.variable} rises past {var.describe(f.value)}")
    more = len(c.flips) - len(parts)
    return "; ".join(parts) + (f"; {more} more" if more > 0 else "")


def summary_line(c: Any, space: Any, samples: int) -> str:
    """ "A-C1: PASS at central values; PASS in 38% of 256 settings; decisive: ...; flips ..." (for the CLI)."""
    dec = c.decisive()
    text = f"{c.claim_id}: {c.central.verdict} at central values; PASS in {100 * c.share('PASS'):.0f}% of {samples}"
    text += f" settings; decisive figure {dec or '–'}"
    return text + (f"; {_flip_text(c, space)}" if c.flips else "")


def _claims_table(result: Any, verdicts: Any = None) -> str:
    """One row per swept claim; a merged claim's PASS share names its unit's, the one that decides
    (:func:`distrepro.claims.tally.unit_shares`)."""
    by_id = {v.claim_id: v for v in verdicts or ()}
    rows = []
    for c in result.claims:
        lo, med, hi = c.stat_quantiles()
        corr = sorted(c.variables, key=lambda n: -abs(c.rank_corr.get(n, 0.0)))[:2]
        rows.append(
            {
                "claim": f"{c.claim_id}: {c.statement}" if c.statement else c.claim_id,
                "central": f"{c.central.verdict} ({fmt(c.central.statistic, c.unit)})",
                "PASS share": share_text(c.share("PASS"), by_id.get(c.claim_id), "%"),
                "FAIL / INCONCL.": f"{100 * c.share('FAIL'):.0f}% / {100 * c.share('INCONCLUSIVE'):.0f}%",
                "statistic 5 / 50 / 95 %": " / ".join(fmt(x, c.unit) for x in (lo, med, hi)),
                "decisive figure": c.decisive() or "–",
                "flips (others central)": _flip_text(c, result.space),
                "rank corr. (LHS)": ", ".join(f"{n} {c.rank_corr[n]:+.2f}" for n in corr) or "–",
            }
        )
    return table(rows, list(rows[0])) if rows else "_no timing claim could be swept_\n"


def _variables_table(result: Any) -> str:
    rows = [
        {
            "figure": v.name,
            "kind": v.kind,
            "central": v.describe(v.central) if v.choices else f"{v.central:.4g} {v.unit}".strip(),
            "range": " / ".join(v.choices) if v.choices else f"{v.low:.4g} – {v.high:.4g} {v.unit}".strip(),
            "spacing": "choice" if v.choices else v.range.spacing,
            "why these bounds": v.range.reason,
            "where": "; ".join(v.places[:3]) + (f" (+{len(v.places) - 3})" if len(v.places) > 3 else ""),
        }
        for v in result.space.variables
    ]
    return table(rows, list(rows[0])) if rows else "_none_\n"


def _validation(result: Any) -> str:
    err = result.max_validation_error()
    n = len(result.validation)
    if not n:
        return "No run could be re-timed."
    text = (
        f"**Check.** At the profiles' central values the analytical times equal the {n} runs' logged emulated "
        f"times within a relative error of {err:.1e}"
    )
    if math.isfinite(err) and err > 1e-6:
        worst = sorted(result.validation, key=lambda r: -r["rel_error"])[:3]
        text += " ⚠ larger than rounding: " + "; ".join(
            f"{r['arm']} seed {r['seed']}: logged {r['logged_s']:.6g} s, analytical {r['analytic_s']:.6g} s"
            for r in worst
        )
    return text + "."


def _disagreements(result: Any, verdicts: Any) -> str:
    """The sweep's central verdicts must be the report's: re-timing at the central values changes nothing."""
    mine = {v.claim_id: v.verdict for v in verdicts or ()}
    odd = [f"{c.claim_id} ({c.central.verdict} here, {mine[c.claim_id]} above)" for c in result.claims
           if c.claim_id in mine and mine[c.claim_id] != c.central.verdict]  # fmt: skip
    return f"⚠ Central verdicts differ from the report's: {', '.join(odd)}.\n" if odd else ""


def sensitivity_section(result: Any, figures: dict[str, Path], out_dir: Path, verdicts: Any = None) -> str:
    """The section's Markdown; ``figures`` from :func:`draw` (paths under ``out_dir``); ``verdicts``, the
    report's, are compared with the sweep's at the central values."""
    space = result.space
    parts = ["## Sensitivity of the timing verdicts", ""]
    parts.append(
        f"Each timing claim re-judged at {result.samples} settings of the {len(space.variables)} uncertain figures "
        f"below (Latin hypercube, seed {result.seed}), plus one-at-a-time scans of each figure with flip points "
        "found by bisection. No training: every run is rebuilt from its logged config and its emulated time "
        "re-derived from the time model (the engine's clock replayed over the method's own allocation, steps and "
        "bytes, re-allocated for each setting), then the claims are judged by the same rules as above "
        f"({result.simulations} simulations, {result.wall_s:.0f} s). {_validation(result)}"
    )
    parts += ["", _claims_table(result, verdicts)]
    if _disagreements(result, verdicts):
        parts.append(_disagreements(result, verdicts))
    if result.skipped:
        parts.append("Not swept: " + "; ".join(f"{cid} ({why})" for cid, why in sorted(result.skipped.items())) + ".\n")
    for key, path in figures.items():
        title = FIGURES[key][2]
        parts += [
            f"### {title}",
            "",
            f"![{title}]({path.relative_to(out_dir).as_posix()})",
            "",
            f"_{_CAPTIONS[key]}_",
            "",
        ]
    parts += ["### Uncertain figures", "", _variables_table(result)]
    held = "; ".join(f"`{p}`: {', '.join(f)}" for p, f in sorted(result.unranged.items()))
    parts.append(
        "Held at their central values: "
        + (f"estimates without a declared range ({held}); " if held else "")
        + "jitter and straggler parameters, speed-change times, the workloads' FLOPs and bytes ([L/D] counts) and "
        "everything measured. Time to a target is read where each run had processed as many samples as it needed "
        "to reach the target (the training trajectory is not re-run). A flip point is "
        "found with the other figures central; the share of settings accounts for them moving together.\n"
    )
    return "\n".join(parts) + "\n"


def _point(p: Any) -> dict[str, Any]:
    return {"verdict": p.verdict, "statistic": p.statistic if math.isfinite(p.statistic) else None}


def to_dict(result: Any) -> dict[str, Any]:
    """Everything but the per-setting rows (those go to ``sensitivity_samples.csv``), JSON-ready."""
    return {
        "paper": result.paper,
        "samples": result.samples,
        "seed": result.seed,
        "simulations": result.simulations,
        "max_validation_rel_error": result.max_validation_error(),
        "validation": result.validation,
        "unranged_estimates": result.unranged,
        "skipped": result.skipped,
        "variables": [
            {
                "name": v.name,
                "kind": v.kind,
                "central": v.central,
                "low": v.low,
                "high": v.high,
                "spacing": v.range.spacing,
                "unit": v.unit,
                "choices": list(v.choices) or None,
                "reason": v.range.reason,
                "places": list(v.places),
            }
            for v in result.space.variables
        ],
        "claims": [
            {
                "id": c.claim_id,
                "unit": c.unit,
                "band": list(c.band) if c.band else None,
                "central": _point(c.central),
                "share": {v: c.share(v) for v in ("PASS", "FAIL", "INCONCLUSIVE")},
                "decisive": c.decisive(),
                "flips": [vars(f) for f in c.flips],
                "tornado": [{"variable": b.variable, "low": _point(b.low), "high": _point(b.high)} for b in c.tornado],
                "rank_corr": c.rank_corr,
                "heat": vars(c.heat) if c.heat else None,
            }
            for c in result.claims
        ],
    }


def write_data(result: Any, out_dir: Path) -> None:
    """``sensitivity.json`` (summary, tornado, flips, heat maps) and ``sensitivity_samples.csv`` (the LHS)."""
    import json

    from distrepro.claims.stats import json_safe

    def clean(x: Any) -> Any:
        if isinstance(x, dict):
            return {str(k): clean(v) for k, v in x.items()}
        if isinstance(x, list | tuple):
            return [clean(v) for v in x]
        return json_safe(x) if isinstance(x, float) else x

    write_text(out_dir, out_dir / "sensitivity.json", json.dumps(clean(to_dict(result)), indent=2))
    frame = result.samples_frame()
    write_with(out_dir, out_dir / "sensitivity_samples.csv", lambda tmp: frame.to_csv(tmp, index=False))
