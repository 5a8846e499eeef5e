"""Per-arm bar charts: emulated time, speedup over the baseline, communication volume.

Horizontal bars with the arm names on the y axis: a name gets a row of its own however long it is
and however many arms there are (vertical bars with rotated names overlapped from about eight arms
on), and the figure grows in height with the arm count. Bars are in the arm's colour; seeds are
black dots. Panels of one figure share the y axis, so a row reads across the figure.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from distrepro import metrics as M
from distrepro.report.figures.figure_style import (
    FONT_PT,
    ROW_IN,
    arm_gid,
    bars_height,
    finished,
    new_figure,
    worker_frame,
)
from distrepro.report.figures.palette import ArmStyle

_JITTER = np.array([0.0, -0.18, 0.18, -0.09, 0.09, -0.27, 0.27])


def _bar_axes(n_panels: int, arms: Sequence[str], width: float = 3.9) -> tuple[Figure, list[Any]]:
    label_in = 0.07 * max(len(a) for a in arms) + 0.4
    fig = new_figure(label_in + width * n_panels, bars_height(len(arms)))
    axes = list(fig.subplots(1, n_panels, squeeze=False, sharey=True)[0])
    axes[0].set_yticks(range(len(arms)), arms, fontsize=FONT_PT)
    axes[0].set_ylim(len(arms) - 0.5, -0.5)  # first arm on top
    for ax in axes:
        ax.grid(axis="y", visible=False)
    return fig, axes


def _hbars(
    ax: Any,
    values: Mapping[str, Sequence[float]],
    arms: Sequence[str],
    style: ArmStyle,
    center: Callable[[np.ndarray], float] = np.median,
) -> None:
    """One bar per arm (``center`` of its values), the values themselves as dots."""
    for i, arm in enumerate(arms):
        vals = np.asarray(values.get(arm, []), dtype=float)
        vals = vals[np.isfinite(vals)]
        if not len(vals):
            continue
        ax.barh(i, center(vals), height=0.72, color=style.color(arm), alpha=0.75, gid=arm_gid(arm))
        ax.scatter(vals, i + _JITTER[np.arange(len(vals)) % len(_JITTER)], s=9, color="black", zorder=3, lw=0)


def time_figure(runs: pd.DataFrame, labels: Mapping[str, str], style: ArmStyle) -> Figure | None:
    """Emulated time to finish the budget and to reach the target, per arm (median bar, seeds as dots)."""
    done = finished(runs, labels)
    cols = [c for c in (M.FINAL_EMULATED_S, M.TIME_TO_TARGET_S) if c in done and done[c].notna().any()]
    if done.empty or not cols:
        return None
    arms = style.present(done["arm"].unique())
    fig, axes = _bar_axes(len(cols), arms)
    for ax, col in zip(axes, cols, strict=True):
        _hbars(ax, {a: g[col].to_numpy(float) for a, g in done.groupby("arm")}, arms, style)
        ax.set_xlabel(
            "emulated time for the budget (s)" if col == M.FINAL_EMULATED_S else "emulated time to target (s)"
        )
    return fig


def _per_seed(rows: pd.DataFrame, col: str) -> pd.Series:
    """``col`` by seed, the newest run's value where a seed has several."""
    order = rows.sort_values("start_time", kind="stable") if "start_time" in rows else rows
    return order.groupby("seed")[col].last()


def _gmean(x: np.ndarray) -> float:
    return float(np.exp(np.log(x).mean()))


def speedup_figure(
    runs: pd.DataFrame,
    labels: Mapping[str, str],
    style: ArmStyle,
    baseline: str,
    marks: Mapping[str, list[tuple[str, str, float]]],
    references: Mapping[str, str] | None = None,
) -> Figure | None:
    """Speedup of every arm over its profile's reference arm (paired by seed; bar = geometric mean), claimed
    values marked; one row of panels per profile (``style.groups``), every arm of the report in one of them.

    ``references``: profile → the arm its arms are divided by (:func:`distrepro.report.build.speedup_references`:
    ``baseline`` on its own profile, elsewhere the arm set up as it is); default ``baseline`` on its profile only.
    A speedup across profiles would compare two emulated clusters, not two methods, so a profile without a
    reference lists its arms without bars, and its panel title says why. ``marks``: arm → (claim id,
    ``"budget"`` or ``"to target"``, claimed value), drawn on that bar.
    """
    done = finished(runs, labels)
    if done.empty:
        return None
    group_of = style.groups.get
    refs = dict(references) if references is not None else {group_of(baseline, ""): baseline}
    per = _paired_speedups(done, refs, style)
    if not per:
        return None
    arms = style.present(done["arm"].unique())
    rows: dict[str, list[str]] = {}
    for arm in arms:  # profiles in report order, each with its arms
        rows.setdefault(group_of(arm, ""), []).append(arm)
    width = _PANEL_IN * len(per)  # a title wraps to the panels' width: the figure is no wider than they are
    missing = f"no arm set up as {baseline} ran here, so no bars"
    titles = {
        group: textwrap.fill(f"{group}: over {refs[group]}" if group in refs else f"{group}: {missing}",
                             int(width * 72 / (FONT_PT * _CHAR_EM)))
        for group in rows
    } if len(rows) > 1 else {}  # fmt: skip
    fig, grid = _speedup_grid(rows, len(per), {g: t.count("\n") + 1 for g, t in titles.items()})
    claimed_max = [0.0] * len(per)
    for group, axes in grid.items():
        if group in titles:
            axes[0].set_title(titles[group], loc="left", fontsize=FONT_PT)
        for c, (ax, (what, values)) in enumerate(zip(axes, per.items(), strict=True)):
            _hbars(ax, values, rows[group], style, center=_gmean)
            ax.axvline(1.0, color="grey", lw=1)
            claimed_max[c] = max(claimed_max[c], _claim_marks(ax, rows[group], marks, what))
    for c, (what, _) in enumerate(per.items()):
        bottom = grid[list(rows)[-1]][c]
        if claimed_max[c] > 0:  # room for the label right of the rightmost claimed value
            bottom.set_xlim(right=max(bottom.get_xlim()[1], 1.35 * claimed_max[c]))
        over = f"vs {baseline}" if len(rows) == 1 else "over the profile's reference"
        bottom.set_xlabel(f"speedup {over} (×),\ntime {'for the budget' if what == 'budget' else 'to target'}")
    return fig


def _paired_speedups(done: pd.DataFrame, refs: Mapping[str, str], style: ArmStyle) -> dict[str, dict[str, list[float]]]:
    """``"budget"``/``"to target"`` -> arm -> the reference's time over the arm's, one value per seed both ran
    (each arm divided by its own profile's reference arm, ``refs``: profile -> arm)."""
    group_of = style.groups.get
    per: dict[str, dict[str, list[float]]] = {}
    for col, what in ((M.FINAL_EMULATED_S, "budget"), (M.TIME_TO_TARGET_S, "to target")):
        if col not in done:
            continue
        for group, ref in refs.items():
            # one value per seed even if a seed ran twice (the report keeps one run per arm and seed; a caller
            # that does not is not a crash): the newest run's
            base = _per_seed(done[done["arm"] == ref], col)
            for arm, g in done[done["arm"].map(lambda a: group_of(a, "")) == group].groupby("arm"):
                for seed, t in _per_seed(g, col).items():
                    if seed in base.index and t > 0 and base[seed] > 0:
                        per.setdefault(what, {}).setdefault(str(arm), []).append(float(base[seed] / t))
    return per


#: inches per panel of the speedup figure, and a character's average width in ems (DejaVu Sans), for wrapping titles
_PANEL_IN, _CHAR_EM = 3.9, 0.6


def _speedup_grid(
    rows: Mapping[str, Sequence[str]], n_cols: int, title_lines: Mapping[str, int]
) -> tuple[Figure, dict[str, list[Any]]]:
    """A row of ``n_cols`` panels per profile, as tall as its arm count and title: columns share x (a speedup
    reads the same down the figure), a row's panels share its arms on y."""
    label_in = 0.07 * max(len(a) for arms in rows.values() for a in arms) + 0.4
    heights = [ROW_IN * len(arms) + 0.25 * title_lines.get(g, 0) + 0.2 for g, arms in rows.items()]
    fig = new_figure(label_in + _PANEL_IN * n_cols, max(2.6, 1.1 + sum(heights)))
    spec = fig.add_gridspec(len(rows), n_cols, height_ratios=heights)
    grid: dict[str, list[Any]] = {}
    first_in_col: list[Any] = []
    for r, (group, arms) in enumerate(rows.items()):
        axes: list[Any] = []
        for c in range(n_cols):
            ax = fig.add_subplot(spec[r, c], sharex=first_in_col[c] if r else None, sharey=axes[0] if axes else None)
            if not r:
                first_in_col.append(ax)
            ax.grid(axis="y", visible=False)
            ax.tick_params(labelbottom=r == len(rows) - 1, labelleft=c == 0)
            axes.append(ax)
        axes[0].set_yticks(range(len(arms)), arms, fontsize=FONT_PT)
        axes[0].set_ylim(len(arms) - 0.5, -0.5)  # first arm on top
        grid[group] = axes
    return fig, grid


def _claim_marks(ax: Any, arms: Sequence[str], marks: Mapping[str, list[tuple[str, str, float]]], what: str) -> float:
    """Claimed values (``what``: budget or to target) on their arms' rows; the largest (0 if none), for the x range."""
    largest = 0.0
    for i, arm in enumerate(arms):
        mine = [(cid, value) for cid, m, value in marks.get(arm, []) if m == what]
        for k, (cid, value) in enumerate(mine):  # several claims on one bar: labels stacked in its row
            y = i + (k - (len(mine) - 1) / 2) * 0.8 / len(mine)
            ax.vlines(value, i - 0.42, i + 0.42, color="black", lw=2)
            ax.text(value, y, f" claimed {cid}: {value:g}×", fontsize=FONT_PT, va="center", ha="left",
                    bbox={"facecolor": "white", "alpha": 0.7, "edgecolor": "none", "pad": 0.5})  # fmt: skip
            largest = max(largest, value)
    return largest


def comm_figure(runs: pd.DataFrame, labels: Mapping[str, str], style: ArmStyle) -> Figure | None:
    """Bytes sent in total (per arm, seeds as dots) and per worker (mean over seeds; line = min–max)."""
    done = finished(runs, labels)
    if done.empty or M.BYTES_TOTAL not in done:
        return None
    per_worker = worker_frame(done)
    per_worker = per_worker[per_worker["field"] == "bytes_sent"]
    arms = style.present(done["arm"].unique())
    fig, axes = _bar_axes(1 if per_worker.empty else 2, arms)
    totals = {a: g[M.BYTES_TOTAL].to_numpy(float) / 1e6 for a, g in done.groupby("arm")}
    _hbars(axes[0], totals, arms, style)
    axes[0].set_xlabel("MB sent, all workers (median over seeds)")
    if not per_worker.empty:
        ax = axes[1]
        for i, arm in enumerate(arms):
            mb = per_worker.loc[per_worker["arm"] == arm, "value"].to_numpy(float) / 1e6
            if len(mb):
                ax.hlines(i, mb.min(), mb.max(), color=style.color(arm), lw=2)
                ax.scatter(mb, np.full(len(mb), i), s=22, color=style.color(arm), edgecolor="black", lw=0.4,
                           zorder=3, gid=arm_gid(arm))  # fmt: skip
        ax.set_xlim(left=0)
        ax.set_xlabel("MB sent per worker (dots: workers, mean over seeds)")
    return fig
