"""Sensitivity figures: how each timing verdict moves over the plausible hardware.

* :func:`share_figure`: per timing claim, the share of Latin-hypercube settings with each verdict
  (stacked horizontal bar), the verdict at the central values marked: the one-glance answer to
  "does this verdict survive what we do not know?";
* :func:`tornado_figure`: per claim, one bar per uncertain figure spanning the claim's statistic
  with that figure at the low and at the high end of its range (others central), widest first
  (figures without effect left out), over the shaded acceptance band; a bar crossing the band's edge
  is a figure that decides the verdict;
* :func:`heatmap_figure`: per claim whose verdict is not the same everywhere, the verdict over its
  two most influential figures (others central), with contours of the statistic.

Verdict colours are the report's (:data:`~distrepro.report.figures.figure_style.VERDICT_COLORS`); panels use
:func:`~distrepro.report.figures.figure_style.panel_grid`, so 2 or 12 claims lay out the same way.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator

from distrepro.report.figures.figure_style import (
    FONT_PT,
    VERDICT_COLORS,
    bars_height,
    legend_on_top,
    new_figure,
    panel_grid,
)
from distrepro.report.figures.metric_labels import describe, shown

_VERDICTS = ("PASS", "FAIL", "INCONCLUSIVE")
_LOW, _HIGH, _BAND = "#4C72B0", "#DD8452", "#2E7D32"
MAX_BARS = 8


def _scale(unit: str) -> tuple[float, str]:
    """The factor from the statistic as judged to as shown, and the unit shown (``× % s`` …, ``""``: none)."""
    label = describe(unit) if unit else None
    return (label.scale, label.unit) if label else (1.0, "")


def _with_unit(value: float, unit: str) -> str:
    """An already scaled ``value`` with ``unit`` (``%`` and ``×`` close up, other units after a space)."""
    number = f"{value:.3g}".replace("inf", "∞")
    return f"{number}{unit}" if unit in ("", "%", "×") else f"{number} {unit}"


def share_figure(result: Any) -> Figure | None:
    claims = result.claims
    if not claims:
        return None
    labels = [c.claim_id for c in claims]
    fig = new_figure(7.0, bars_height(len(claims), extra=1.3))
    ax = fig.subplots()
    for i, c in enumerate(claims):
        left = 0.0
        for verdict in _VERDICTS:
            share = c.share(verdict)
            if share > 0:
                ax.barh(i, 100 * share, left=left, color=VERDICT_COLORS[verdict], height=0.7)
                if share >= 0.08:
                    ax.text(left + 50 * share, i, f"{100 * share:.0f}%", ha="center", va="center", color="white",
                            fontsize=FONT_PT, fontweight="bold")  # fmt: skip
                left += 100 * share
        ax.text(101.5, i, f"central: {c.central.verdict}", va="center", fontsize=FONT_PT,
                color=VERDICT_COLORS.get(c.central.verdict, "black"))  # fmt: skip
    ax.set_yticks(range(len(labels)), labels, fontsize=FONT_PT)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.set_xlim(0, 100)
    ax.set_xlabel(f"share of {result.samples} plausible settings, Latin hypercube (%)", fontsize=FONT_PT)
    ax.grid(axis="y", visible=False)
    handles = [Patch(color=VERDICT_COLORS[v]) for v in _VERDICTS]
    legend_on_top(fig, handles, list(_VERDICTS))
    return fig


def _band(ax: Any, band: Any, k: float, unit: str = "") -> None:
    """Shade the acceptance band. A band edge near the bars (within twice their spread) widens the x
    range; a far one is named in a note at that side instead, or the bars would shrink to nothing (and
    then the verdict cannot flip in the range, which the note shows)."""
    if band is None:
        return
    x0, x1 = ax.get_xlim()
    lo, hi = (e * k if math.isfinite(e) else e for e in band)
    spread = max(x1 - x0, 1e-12)
    far = [e for e in (lo, hi) if math.isfinite(e) and not x0 - 2 * spread <= e <= x1 + 2 * spread]
    for e in (lo, hi):
        if math.isfinite(e) and e not in far:
            x0, x1 = min(x0, e), max(x1, e)
    pad = 0.04 * (x1 - x0)
    x0, x1 = x0 - pad, x1 + pad
    a, b = max(lo, x0), min(hi, x1)
    if a < b:
        ax.axvspan(a, b, color=_BAND, alpha=0.12, lw=0)
    ax.set_xlim(x0, x1)
    if far:
        text = f"acceptance band [{_with_unit(lo, unit)}, {_with_unit(hi, unit)}]"
        right = all(e > x1 for e in far)
        note = f"{text} →" if right else f"← {text}"
        ax.text(0.98 if right else 0.02, 0.03, note, transform=ax.transAxes, ha="right" if right else "left",
                va="bottom", fontsize=FONT_PT, color=_BAND)  # fmt: skip


def _unit_label(unit: str) -> str:
    suffix = _scale(unit)[1]
    return f"statistic ({suffix})" if suffix else "statistic"


def _span(var: Any) -> str:
    """``0.11–1.1 GB/s``, or ``auto / hierarchical`` for a categorical figure (low end first)."""
    if var.choices:
        return " / ".join(var.choices)
    return f"{var.low:.3g}–{var.high:.3g} {var.unit}".strip()


def tornado_figure(result: Any) -> Figure | None:
    """One panel per claim; bars: the statistic at each figure's low (blue) and high (orange) end."""
    claims = [c for c in result.claims if any(b.span > 0 for b in c.tornado)]
    if not claims:
        return None
    rows = [min(MAX_BARS, sum(b.variable in c.variables and b.span > 0 for b in c.tornado)) for c in claims]
    fig, axes = panel_grid(len(claims), 4.6, [0.5 + 0.32 * max(rows)] * len(claims), max_cols=2)
    space = result.space
    for ax, c in zip(axes, claims, strict=True):
        k = _scale(c.unit)[0]
        bars = [b for b in c.tornado if b.variable in c.variables and b.span > 0][:MAX_BARS]
        mid = c.central.statistic * k
        for i, b in enumerate(bars):
            for p, color in ((b.low, _LOW), (b.high, _HIGH)):
                if math.isfinite(p.statistic):
                    ax.barh(i, p.statistic * k - mid, left=mid, color=color, height=0.6, alpha=0.9)
        names = [f"{b.variable}\n[{_span(space[b.variable])}]" for b in bars]
        ax.set_yticks(range(len(bars)), names, fontsize=FONT_PT)
        ax.set_ylim(len(bars) - 0.5, -0.5)
        ax.axvline(mid, color="black", lw=0.8)
        ax.margins(x=0.08)
        _band(ax, c.band, k, _scale(c.unit)[1])
        central = f"central {shown(c.central.statistic, c.unit, digits=3)}, {c.central.verdict}"
        ax.set_title(f"{c.claim_id} ({central})", fontsize=FONT_PT, loc="left")
        ax.set_xlabel(_unit_label(c.unit), fontsize=FONT_PT)
        ax.xaxis.set_major_locator(MaxNLocator(5))
        ax.tick_params(axis="x", labelsize=FONT_PT)
        ax.grid(axis="y", visible=False)
    handles = [Patch(color=_LOW), Patch(color=_HIGH), Patch(color=_BAND, alpha=0.25)]
    legend_on_top(fig, handles, ["figure at its low end", "figure at its high end", "acceptance band"])
    return fig


def heatmap_figure(result: Any) -> Figure | None:
    claims = [c for c in result.claims if c.heat is not None]
    if not claims:
        return None
    fig, axes = panel_grid(len(claims), 4.2, [3.4] * len(claims), max_cols=2)
    cmap = ListedColormap([VERDICT_COLORS[v] for v in _VERDICTS])
    for ax, c in zip(axes, claims, strict=True):
        h = c.heat
        assert h is not None
        xv, yv = result.space[h.x], result.space[h.y]
        codes = np.array([[_VERDICTS.index(v) if v in _VERDICTS else 2 for v in row] for row in h.verdict])
        ax.pcolormesh(h.xs, h.ys, codes, cmap=cmap, vmin=-0.5, vmax=2.5, shading="nearest", alpha=0.55)
        k, unit = _scale(c.unit)
        stat = np.array(h.statistic, dtype=float) * k
        if np.isfinite(stat).sum() >= 4 and np.nanmax(stat) > np.nanmin(stat):
            cs = ax.contour(h.xs, h.ys, stat, levels=6, colors="black", linewidths=0.6)
            ax.clabel(cs, fontsize=FONT_PT, fmt=lambda v, u=unit: _with_unit(v, u))
        ax.plot([xv.central], [yv.central], marker="*", color="black", ms=9, ls="none")
        for var, axis, set_scale in ((xv, ax.xaxis, ax.set_xscale), (yv, ax.yaxis, ax.set_yscale)):
            if var.choices:  # categorical: one tick per choice, named
                axis.set_major_locator(FixedLocator([float(i) for i in range(len(var.choices))]))
                axis.set_major_formatter(FuncFormatter(lambda v, _, c=var.choices: c[round(v)]))
            elif var.range.spacing == "log":
                set_scale("log")
                axis.set_major_locator(FixedLocator([float(f"{t:.2g}") for t in np.geomspace(var.low, var.high, 5)]))
                axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
                axis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
        ax.set_xlabel(f"{h.x} ({xv.unit})" if xv.unit else h.x, fontsize=FONT_PT)
        ax.set_ylabel(f"{h.y} ({yv.unit})" if yv.unit else h.y, fontsize=FONT_PT)
        ax.tick_params(labelsize=FONT_PT)
        ax.set_title(f"{c.claim_id}: verdict, contours = statistic", fontsize=FONT_PT, loc="left")
    handles = [Patch(color=VERDICT_COLORS[v], alpha=0.55) for v in _VERDICTS]
    star = ax.plot([], [], marker="*", color="black", ls="none")[0]
    legend_on_top(fig, [*handles, star], [*_VERDICTS, "central values"])
    return fig
