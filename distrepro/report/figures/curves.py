"""Quality curves per arm against emulated time or epochs (median over seeds, min–max band).

With many arms on several profiles (Chao: 16 arms on 7 emulated clusters) one panel would hold
16 tangled lines that only share an axis, not a comparison: arms are then faceted one row per
group (profile), each row with the legend of its own few arms beside it. Otherwise one row
holds every arm, the legend beside the last panel.

An arm's curve has its colour, line style and marker (:class:`ArmStyle`), so two arms stay apart
where their curves overlap or their colours read alike; axes are labelled in words with units
(:mod:`.metric_labels`), accuracy in per cent.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from distrepro import metrics as M
from distrepro.report.figures.figure_style import FONT_PT, arm_gid, legend_beside, new_figure
from distrepro.report.figures.metric_labels import axis_label, describe
from distrepro.report.figures.palette import ArmStyle

FACET_ABOVE = 6  # arms; with more (and several groups) the curves are faceted by group
MARKS_PER_CURVE = 8  # markers along a curve: enough to tell the arm, few enough not to hide the line


def _summary(data: pd.DataFrame, runs: Sequence[str], x: str, metric: str) -> tuple[np.ndarray, ...] | None:
    series = []
    for run in runs:
        c = data[data["run_id"] == run].dropna(subset=[x, metric]).sort_values(x)
        if len(c):
            series.append((c[x].to_numpy(float), c[metric].to_numpy(float)))
    if not series:
        return None
    grid = np.unique(np.concatenate([s[0] for s in series]))
    stack = np.vstack([np.interp(grid, sx, sy, left=np.nan, right=np.nan) for sx, sy in series])
    with np.errstate(all="ignore"):
        return grid, np.nanmedian(stack, 0), np.nanmin(stack, 0), np.nanmax(stack, 0), np.array(len(series))


def curves_figure(
    curves: pd.DataFrame,
    labels: Mapping[str, str],
    style: ArmStyle,
    x: str,
    metrics: Sequence[str] = (M.VAL_ACCURACY, M.VAL_LOSS),
    log_y: bool = False,
) -> Figure | None:
    """Quality vs ``x`` per arm: median over seeds, min–max band (curves interpolated on the union of x).

    ``log_y``: a logarithmic y axis (consensus distances span decades); arms with no positive value are left out,
    and so is the figure when none has one."""
    data = curves[curves["run_id"].isin(list(labels))]
    if log_y:
        data = data.copy()
        for m in metrics:
            if m in data.columns:
                data[m] = data[m].where(data[m] > 0)
    metrics = [m for m in metrics if m in data.columns and data[m].notna().any()]
    if data.empty or x not in data.columns or not metrics:
        return None
    arms = style.present(labels[r] for r in data["run_id"].unique())
    if style.groups and len(arms) > FACET_ABOVE:
        rows = list(dict.fromkeys(style.groups.get(a, "") for a in arms))
        members = {g: [a for a in arms if style.groups.get(a, "") == g] for g in rows}
    else:
        rows, members = [""], {"": arms}
    row_in = 2.3 if len(rows) > 1 else 3.4
    label_chars = int((row_in - 0.6) * 72 / (FONT_PT * 0.6))  # a y label's line: the plot's height, in characters
    fig = new_figure(4.3 * len(metrics) + 1.8, row_in * len(rows) + 0.2)
    axes = fig.subplots(len(rows), len(metrics), squeeze=False)  # x not shared: each cluster has its own time scale
    for i, group in enumerate(rows):
        for ax, metric in zip(axes[i], metrics, strict=True):
            scale = describe(metric).scale
            for arm in members[group]:
                s = _summary(data, [r for r, lab in labels.items() if lab == arm], x, metric)
                if s is None:
                    continue
                grid, med, lo, hi, n = s
                color = style.color(arm)
                ax.plot(
                    grid, scale * med, color=color, ls=style.linestyle(arm), lw=1.4, marker=style.marker(arm), ms=4,
                    markevery=max(1, len(grid) // MARKS_PER_CURVE), label=f"{arm} (n={int(n)} seeds)", gid=arm_gid(arm),
                )  # fmt: skip
                if int(n) > 1:
                    ax.fill_between(grid, scale * lo, scale * hi, color=color, alpha=0.18, linewidth=0)
            # wrapped to the panel's height: a faceted row is short, and a label longer than it runs into the next
            ax.set_ylabel(textwrap.fill(axis_label(metric), label_chars), fontsize=FONT_PT)
            if log_y:
                ax.set_yscale("log")
            if group:
                ax.set_title(group, fontsize=FONT_PT, loc="left")
            ax.tick_params(labelsize=FONT_PT)
            if i == len(rows) - 1:
                ax.set_xlabel(axis_label(x))
        handles, names = axes[i][0].get_legend_handles_labels()
        if handles:
            legend_beside(axes[i][-1], handles, names)
    return fig
