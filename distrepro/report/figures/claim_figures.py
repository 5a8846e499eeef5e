"""The claims panel: per judged claim, the per-seed values, statistic and CI, band, claimed, ideal.

Each panel's y axis says what the statistic *is*: an ordering claim plots the smallest gap between
adjacent arms and a non-inferiority claim a difference to the baseline, not the raw metric they are
computed from, so the axis label names the gap or difference, the baseline and the unit. One legend
for the whole figure sits below the panels (the marks mean the same in every panel); per-panel
legends covered the tick labels.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from distrepro.claims.verdicts import Verdict, fmt
from distrepro.report.figures.figure_style import FONT_PT, VERDICT_COLORS, cols_that_fit, metric_unit, new_figure

_IDEAL, _BAND = "#6A1B9A", "#2E7D32"


def _unit(metric: str) -> str:
    unit = metric_unit(metric)
    return f" ({unit})" if unit else ""


def claim_axis_label(claim: Any) -> str:
    """What a claim's panel plots, with its unit (the statistic, not the metric it is computed from)."""
    metric = getattr(claim, "metric", None) or ""
    name = metric.removeprefix("final/")
    base = getattr(claim, "baseline", None)
    if claim.kind == "speedup":
        what = "time to target" if claim.measure == "time_to_target" else "time for the budget"
        return f"speedup vs {base} (×)\n{what}, {claim.clock} clock"
    if claim.kind == "relative_improvement":
        if claim.form == "ratio":
            how = f"{base} / {claim.arm}" if claim.direction == "min" else f"{claim.arm} / {base}"
            return f"ratio of {name} (×)\n{how}"
        if claim.form == "difference":
            sign = "" if claim.direction == "max" else " (sign flipped: lower is better)"
            return f"difference in {name}{_unit(metric)}\n{claim.arm} − {base}{sign}"
        word = "reduction" if claim.direction == "min" else "increase"
        return f"{word} in {name}\nvs {base} (%)"
    if claim.kind == "non_inferiority":
        sign = "" if claim.direction == "max" else " (sign flipped: lower is better)"
        return f"difference in {name}{_unit(metric)}\n{claim.arm} − {base}{sign}"
    if claim.kind == "ordering":
        return f"smallest gap between adjacent arms\nin median {name}{_unit(metric)}\n(> 0: in the claimed order)"
    if claim.kind == "convergence":
        op = "≥" if claim.target.direction == "max" else "≤"
        return f"{claim.unit} to reach\n{claim.target.metric} {op} {claim.target.value:g}"
    return f"{name}{_unit(metric)}" + ("" if claim.direction == "max" else "\n(lower is better)")


def _claim_panel(ax: Any, v: Verdict, claim: Any) -> None:
    scale = 100.0 if v.unit == "fraction" else 1.0
    claimed = getattr(claim, "claimed", None)
    claimed_vals = (
        [c * scale for c in (claimed if isinstance(claimed, tuple) else (claimed,))] if claimed is not None else []
    )
    ideal = claim.ideal.value * scale if claim.ideal is not None else None
    points = np.array(list(v.points.values()), dtype=float) * scale
    ci = [c * scale for c in v.ci] if v.ci is not None and all(math.isfinite(c) for c in v.ci) else []
    band = [b * scale for b in v.band] if v.band is not None else []
    s = v.statistic * scale  # type: ignore[operator]
    seen = [s, *points, *ci, *claimed_vals, *[b for b in band if math.isfinite(b)]] + (
        [ideal] if ideal is not None else []
    )
    lo, hi = min(seen), max(seen)
    pad = 0.12 * (hi - lo) if hi > lo else max(abs(hi) * 0.1, 1e-9)
    ylim = (lo - pad, hi + pad)
    if band:  # an open band edge (one-sided, or a threshold) is drawn to the edge of the panel
        ax.axhspan(max(band[0], ylim[0]), min(band[1], ylim[1]), color=_BAND, alpha=0.12)
    for c in claimed_vals:
        ax.axhline(c, color="black", lw=1.2)
    if ideal is not None:
        ax.axhline(ideal, color=_IDEAL, lw=1.2, ls="--")
    if len(points):
        ax.scatter(np.full(len(points), -0.15), points, s=18, color="#555555", zorder=3)
    color = VERDICT_COLORS[v.verdict]
    if ci:
        err = [[max(s - ci[0], 0)], [max(ci[1] - s, 0)]]
        ax.errorbar([0.15], [s], yerr=err, fmt="o", color=color, capsize=4, zorder=4)
    else:
        ax.scatter([0.15], [s], color=color, zorder=4, marker="^" if v.statistic_name.startswith("lower") else "o")
    ax.set_ylim(*ylim)
    ax.set_xlim(-0.6, 0.6)
    ax.set_xticks([])
    ax.set_ylabel(claim_axis_label(claim), fontsize=FONT_PT)
    ax.tick_params(axis="y", labelsize=FONT_PT)
    bound = "≥ " if v.statistic_name.startswith("lower bound") else ""
    miss = f", {v.miss}" if v.miss else ""
    ax.set_title(f"{v.claim_id}: {v.verdict}{miss}\n{bound}{fmt(v.statistic, v.unit)}", color=color, fontsize=FONT_PT)


def _legend(fig: Figure, shown: Sequence[Verdict], claims: Mapping[str, Any]) -> None:
    entries: list[tuple[Any, str]] = []
    if any(v.band is not None for v in shown):
        entries.append((Patch(color=_BAND, alpha=0.12), "acceptance band"))
    if any(getattr(claims[v.claim_id], "claimed", None) is not None for v in shown):
        entries.append((Line2D([], [], color="black", lw=1.2), "claimed"))
    if any(claims[v.claim_id].ideal is not None for v in shown):
        entries.append((Line2D([], [], color=_IDEAL, lw=1.2, ls="--"), "ideal bound (see the claims table)"))
    if any(v.points for v in shown):
        entries.append((Line2D([], [], color="#555555", marker="o", ls="", ms=4), "per seed"))
    entries.append((Line2D([], [], color="#333333", marker="o", ls="-", ms=5), "statistic and CI (colour: verdict)"))
    handles, names = zip(*entries, strict=True)
    fig.legend(handles, names, loc="outside lower center", ncol=len(entries), fontsize=FONT_PT, frameon=False)


def claims_figure(verdicts: Sequence[Verdict], claims: Mapping[str, Any]) -> Figure | None:
    """One panel per judged claim: per-seed points, statistic with CI, acceptance band, claimed, ideal."""
    shown = [v for v in verdicts if v.statistic is not None and math.isfinite(v.statistic)]
    if not shown:
        return None
    cols = min(cols_that_fit(3.3), len(shown))
    rows = math.ceil(len(shown) / cols)
    fig = new_figure(3.3 * cols, 2.9 * rows + 0.4)
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax in axes.flat[len(shown) :]:
        ax.set_visible(False)
    for ax, v in zip(axes.flat, shown, strict=False):
        _claim_panel(ax, v, claims[v.claim_id])
    _legend(fig, shown, claims)
    return fig
