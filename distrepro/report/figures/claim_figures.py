"""The claims panel: per judged claim, the per-seed values, statistic and CI, band, claimed, ideal.

Each panel's y axis says what the statistic *is*: an ordering claim plots the smallest gap between
adjacent arms and a non-inferiority claim a difference to the baseline, not the raw metric they are
computed from, so the axis label names the gap or difference, the baseline and the unit. One legend
for the whole figure sits below the panels (the marks mean the same in every panel); per-panel
legends covered the tick labels.

Metrics are named in words and every number carries its unit (:mod:`.metric_labels`): a title reads
``43.5%``, ``+1.2 pts`` or ``4.356 s``, never a bare ``4.356``. The figure is sized by its texts
(:func:`claims_figure`), so a long claim id, a FAIL's reason or a three-line axis label is wrapped
inside its panel instead of being cut off at the figure's edge or running into the next panel.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from distrepro.claims.verdicts import Verdict
from distrepro.report.figures.figure_style import FONT_PT, VERDICT_COLORS, cols_that_fit, new_figure
from distrepro.report.figures.metric_labels import describe, shown

_IDEAL, _BAND = "#6A1B9A", "#2E7D32"
#: inches: a panel's data area, and a character's average width in ems (DejaVu Sans), for wrapping its texts
_PLOT_W, _PLOT_H, _CHAR_EM = 2.3, 2.1, 0.6
#: inches per line of 10-point text (matplotlib's default line spacing of 1.2)
_LINE_IN = FONT_PT * 1.2 / 72


def _chars(inches: float) -> int:
    return max(12, int(inches * 72 / (FONT_PT * _CHAR_EM)))


def _words(metric: str) -> str:
    return describe(metric).words


def _unit(metric: str, difference: bool = False) -> str:
    label = describe(metric)
    unit = label.diff_unit if difference else label.unit
    return f" ({unit})" if unit else ""


def claim_axis_label(claim: Any) -> str:
    """What a claim's panel plots, in words with its unit (the statistic, not the metric it is computed from)."""
    metric = getattr(claim, "metric", None) or ""
    name = _words(metric)
    base = getattr(claim, "baseline", None)
    if claim.kind == "speedup":
        what = "time to target" if claim.measure == "time_to_target" else "time for the budget"
        return f"speedup vs {base} (×), {what}, {claim.clock} clock"
    if claim.kind == "relative_improvement":
        if claim.form == "ratio":
            how = f"{base} / {claim.arm}" if claim.direction == "min" else f"{claim.arm} / {base}"
            return f"ratio of {name} (×), {how}"
        if claim.form == "difference":
            sign = "" if claim.direction == "max" else ", sign flipped: lower is better"
            return f"difference in {name}{_unit(metric, True)}, {claim.arm} − {base}{sign}"
        word = "reduction" if claim.direction == "min" else "increase"
        return f"{word} in {name} vs {base} (%)"
    if claim.kind == "non_inferiority":
        sign = "" if claim.direction == "max" else ", sign flipped: lower is better"
        return f"difference in {name}{_unit(metric, True)}, {claim.arm} − {base}{sign}"
    if claim.kind == "ordering":
        return f"smallest gap between adjacent arms in median {name}{_unit(metric, True)}; > 0: in the claimed order"
    if claim.kind == "convergence":
        op = "≥" if claim.target.direction == "max" else "≤"
        unit = "emulated seconds" if claim.unit == "emulated_s" else claim.unit
        target = shown(claim.target.value, claim.target.metric, digits=3)
        return f"{unit} to reach {_words(claim.target.metric)} {op} {target}"
    return f"{name}{_unit(metric)}" + ("" if claim.direction == "max" else ", lower is better")


def panel_unit(v: Verdict, claim: Any) -> tuple[str, bool]:
    """The key :func:`~distrepro.report.figures.metric_labels.describe` knows the panel's values by, and whether
    they are differences (an accuracy difference is in points, not per cent): the verdict's own unit."""
    key = v.unit or getattr(claim, "metric", None) or ""
    if claim.kind == "convergence" and key == "emulated_s":
        key = "time/emulated_s"  # seconds to reach the target, not the budget's
    difference = claim.kind in ("non_inferiority", "ordering") or (
        claim.kind == "relative_improvement" and claim.form == "difference"
    )
    return key, difference


def _title(v: Verdict, claim: Any, width_in: float) -> str:
    """``B-C2: PASS`` and the statistic with its unit, the miss on a line of its own, wrapped to the panel."""
    key, difference = panel_unit(v, claim)
    bound = "≥ " if v.statistic_name.startswith("lower bound") else ""
    lines = [
        f"{v.claim_id}: {v.verdict}",
        *([v.miss] if v.miss else []),
        f"{bound}{shown(v.statistic, key, difference)}",
    ]
    return "\n".join(textwrap.fill(line, _chars(width_in)) for line in lines)


def _claim_panel(ax: Any, v: Verdict, claim: Any, title: str, ylabel: str) -> None:
    scale = describe(panel_unit(v, claim)[0]).scale
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
    ax.set_ylabel(ylabel, fontsize=FONT_PT)
    ax.tick_params(axis="y", labelsize=FONT_PT)
    ax.set_title(title, color=color, fontsize=FONT_PT)


def _legend(fig: Figure, shown_: Sequence[Verdict], claims: Mapping[str, Any]) -> None:
    entries: list[tuple[Any, str]] = []
    if any(v.band is not None for v in shown_):
        entries.append((Patch(color=_BAND, alpha=0.12), "acceptance band"))
    if any(getattr(claims[v.claim_id], "claimed", None) is not None for v in shown_):
        entries.append((Line2D([], [], color="black", lw=1.2), "claimed"))
    if any(claims[v.claim_id].ideal is not None for v in shown_):
        entries.append((Line2D([], [], color=_IDEAL, lw=1.2, ls="--"), "ideal bound (see the claims table)"))
    if any(v.points for v in shown_):
        entries.append((Line2D([], [], color="#555555", marker="o", ls="", ms=4), "per seed"))
    entries.append((Line2D([], [], color="#333333", marker="o", ls="-", ms=5), "statistic and CI (colour: verdict)"))
    handles, names = zip(*entries, strict=True)
    entry_chars = max(len(n) for n in names) + 6  # the handle and the gap to the next entry, in characters
    ncol = max(1, min(len(entries), _chars(fig.get_figwidth()) // entry_chars))
    fig.legend(handles, names, loc="outside lower center", ncol=ncol, fontsize=FONT_PT, frameon=False)


def claims_figure(verdicts: Sequence[Verdict], claims: Mapping[str, Any]) -> Figure | None:
    """One panel per judged claim: per-seed points, statistic with CI, acceptance band, claimed, ideal.

    Sized by its texts, so none is cut off or runs into a neighbour: y labels are wrapped to the panel's height
    and every panel is as wide as the most lines any of them takes; titles are wrapped to the panel's width and
    each row is as tall as its longest title."""
    shown_ = [v for v in verdicts if v.statistic is not None and math.isfinite(v.statistic)]
    if not shown_:
        return None
    ylabels = [textwrap.fill(claim_axis_label(claims[v.claim_id]), _chars(_PLOT_H)) for v in shown_]
    label_lines = max(y.count("\n") + 1 for y in ylabels)
    panel_w = _PLOT_W + 0.6 + label_lines * _LINE_IN  # plot, tick labels, the y label's lines
    cols = min(cols_that_fit(panel_w), len(shown_))
    rows = math.ceil(len(shown_) / cols)
    titles = [_title(v, claims[v.claim_id], _PLOT_W) for v in shown_]  # centred on the plot, not the label
    heights = [
        _PLOT_H + 0.15 + _LINE_IN * max(t.count("\n") + 1 for t in titles[r * cols : (r + 1) * cols])
        for r in range(rows)
    ]
    fig = new_figure(panel_w * cols, sum(heights) + 0.6)  # + the legend
    axes = fig.subplots(rows, cols, squeeze=False, gridspec_kw={"height_ratios": heights})
    for ax in axes.flat[len(shown_) :]:
        ax.set_visible(False)
    for ax, v, title, ylabel in zip(axes.flat, shown_, titles, ylabels, strict=False):
        _claim_panel(ax, v, claims[v.claim_id], title, ylabel)
    _legend(fig, shown_, claims)
    return fig
