"""Per-worker figures, one panel per arm: timeline (Gantt), compute/comm/idle breakdown, allocation.

Panels sit in a grid of at most three or four columns (:func:`panel_grid`), so 16 arms make a
4 × 4 grid rather than one strip 6000 pixels wide; an arm's panel shows only the workers it has.
Span colours (compute / comm / idle) mean the same in every panel and are explained once, in a
legend above the grid; each panel's title is framed in its arm's colour.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from distrepro.report.figures.figure_style import (
    FONT_PT,
    SPAN_COLORS,
    arm_gid,
    arm_title,
    cols_that_fit,
    finished,
    grid_shape,
    legend_on_top,
    panel_grid,
    worker_frame,
)
from distrepro.report.figures.palette import ArmStyle

_SPAN_HANDLES = [Patch(color=c) for c in SPAN_COLORS.values()]


def _window(tl: pd.DataFrame, max_steps: int) -> pd.DataFrame:
    """The first steps, stretched to include two communications (so the pattern is visible), ≤ max_steps."""
    steps = sorted(tl["step"].unique())
    comm_steps = sorted(tl.loc[tl["kind"] == "comm", "step"].unique())
    last = max(steps[: min(4, len(steps))][-1], comm_steps[1] if len(comm_steps) > 1 else steps[0])
    last = min(last, steps[min(len(steps), max_steps) - 1])
    return tl[tl["step"] <= last]


def _span_boxes(tl: pd.DataFrame, ranks: list[int], kind: str) -> np.ndarray:
    """The rectangles of every ``kind`` span of ``tl``, ``(n, 4, 2)``: x in ms, worker ``ranks[i]`` on row ``i``
    (0.8 high, centred on ``i``), as ``broken_barh`` draws them, worker by worker. One collection per kind and
    panel rather than one per kind and worker: 192 artists a panel at 64 workers made the timeline the report's
    costliest figure."""
    spans = tl[tl["kind"] == kind].sort_values("rank", kind="stable")
    row = spans["rank"].map({r: i for i, r in enumerate(ranks)}).to_numpy(float)
    x0 = (spans["start_s"] * 1e3).to_numpy(float)
    x1 = x0 + ((spans["end_s"] - spans["start_s"]) * 1e3).to_numpy(float)
    y0 = row - 0.4
    y1 = y0 + 0.8
    corners = [(x0, y0), (x0, y1), (x1, y1), (x1, y0)]
    return np.stack([np.stack(c, axis=-1) for c in corners], axis=1).reshape(len(spans), 4, 2)


def _row_heights(sizes: list[int], cols: int, per: float, extra: float) -> list[float]:
    return [extra + per * max(sizes[i : i + cols]) for i in range(0, len(sizes), cols)]


def timeline_figure(timelines: Mapping[str, pd.DataFrame], style: ArmStyle, max_steps: int = 8) -> Figure | None:
    """Per-worker Gantt chart of compute / comm / idle over the first steps of one run per arm."""
    items = [(a, timelines[a]) for a in style.present(timelines) if timelines[a] is not None and len(timelines[a])]
    if not items:
        return None
    items = [(arm, _window(tl, max_steps)) for arm, tl in items]
    _, cols = grid_shape(len(items), max_cols=cols_that_fit(4.3, 3))
    heights = _row_heights([tl["rank"].nunique() for _, tl in items], cols, per=0.2, extra=0.75)
    fig, axes = panel_grid(len(items), 4.3, heights, max_cols=3, sharex=True)  # one time scale for every arm
    for ax, (arm, tl) in zip(axes, items, strict=True):
        ranks = sorted(tl["rank"].unique())
        for kind, color in SPAN_COLORS.items():
            boxes: Any = _span_boxes(tl, ranks, kind)  # an (n, 4, 2) array, as broken_barh passes (the stubs say list)
            ax.add_collection(PolyCollection(boxes, facecolors=color))
        ax.set_yticks(range(len(ranks)), [f"w{r}" for r in ranks], fontsize=FONT_PT)
        ax.set_ylim(len(ranks) - 0.5, -0.5)
        ax.tick_params(axis="x", labelsize=FONT_PT)
        steps = f"steps {int(tl['step'].min())}–{int(tl['step'].max())}"
        arm_title(ax, arm, style.color(arm), f"{arm}: {steps}")
    fig.supxlabel("emulated time since the start of the run (ms)", fontsize=FONT_PT)
    legend_on_top(fig, _SPAN_HANDLES, list(SPAN_COLORS))
    return fig


def breakdown_figure(runs: pd.DataFrame, labels: Mapping[str, str], style: ArmStyle) -> Figure | None:
    """Stacked compute / comm / idle seconds per worker, one panel per arm (mean over seeds)."""
    frame = worker_frame(finished(runs, labels))
    frame = frame[frame["field"].isin(["compute_s", "comm_s", "idle_s"])]
    if frame.empty:
        return None
    arms = style.present(frame["arm"].unique())
    most = int(frame.groupby("arm")["rank"].nunique().max())
    rows, _ = grid_shape(len(arms))
    fig, axes = panel_grid(len(arms), max(2.4, 0.28 * most + 1.2), [2.0] * rows, sharey=True)
    for ax, arm in zip(axes, arms, strict=True):
        wide = frame[frame["arm"] == arm].pivot(index="rank", columns="field", values="value").fillna(0.0)
        bottom = np.zeros(len(wide))
        for field, kind in (("compute_s", "compute"), ("comm_s", "comm"), ("idle_s", "idle")):
            vals = wide.get(field, pd.Series(0.0, index=wide.index)).to_numpy()
            ax.bar([str(r) for r in wide.index], vals, bottom=bottom, color=SPAN_COLORS[kind], width=0.7)
            bottom += vals
        ax.tick_params(labelsize=FONT_PT)
        ax.grid(axis="x", visible=False)
        arm_title(ax, arm, style.color(arm))
    fig.supxlabel("worker", fontsize=FONT_PT)
    fig.supylabel("emulated time (s), mean over seeds", fontsize=FONT_PT)
    legend_on_top(fig, _SPAN_HANDLES, list(SPAN_COLORS))
    return fig


def allocation_figure(
    runs: pd.DataFrame, alloc: pd.DataFrame, labels: Mapping[str, str], style: ArmStyle
) -> Figure | None:
    """Share of the data per worker, one panel per arm (last epoch, mean over seeds): the share the
    arm started from where it moved (an adaptive split), and the share of the summed device speed a
    speed-aware split aims at (black ticks)."""
    a = alloc[alloc["run_id"].isin(list(labels))].assign(arm=lambda d: d["run_id"].map(labels))
    a = a.dropna(subset=["share"])
    if a.empty:
        return None
    first = a[a["epoch"] == a.groupby("run_id")["epoch"].transform("min")]
    last = a[a["epoch"] == a.groupby("run_id")["epoch"].transform("max")]
    has_speed = "speed" in last and last["speed"].notna().any()
    if has_speed:
        last = last.assign(speed_share=last["speed"] / last.groupby("run_id")["speed"].transform("sum"))
    arms = style.present(a["arm"].unique())
    most = int(a.groupby("arm")["rank"].nunique().max())
    rows, _ = grid_shape(len(arms))
    fig, axes = panel_grid(len(arms), max(2.4, 0.28 * most + 1.2), [2.0] * rows, sharey=True)
    moved = False
    for ax, arm in zip(axes, arms, strict=True):
        end = last[last["arm"] == arm].groupby("rank")["share"].mean()
        start = first[first["arm"] == arm].groupby("rank")["share"].mean().reindex(end.index)
        x = np.arange(len(end))
        ax.bar(x, 100 * end.to_numpy(), color=style.color(arm), width=0.7, alpha=0.85, gid=arm_gid(arm))
        if not np.allclose(start.to_numpy(), end.to_numpy(), atol=1e-9, equal_nan=True):
            moved = True
            ax.scatter(x, 100 * start.to_numpy(), marker="D", s=18, facecolor="white", edgecolor="black", lw=0.8,
                       zorder=4)  # fmt: skip
        if has_speed:
            speed = last[last["arm"] == arm].groupby("rank")["speed_share"].mean().reindex(end.index)
            ax.scatter(x, 100 * speed.to_numpy(), marker="_", s=160, color="black", lw=1.6, zorder=5)
        ax.set_xticks(x, [str(r) for r in end.index])
        ax.tick_params(labelsize=FONT_PT)
        ax.grid(axis="x", visible=False)
        arm_title(ax, arm, style.color(arm))
    entries: list[tuple[Artist, str]] = [(Patch(color="#888888"), "share at the last epoch")]
    if moved:
        entries.append((Line2D([], [], marker="D", ls="", mfc="white", mec="black"), "share at the first epoch"))
    if has_speed:
        entries.append((Line2D([], [], marker="_", ls="", color="black", ms=12, mew=1.6), "share of summed speed"))
    fig.supxlabel("worker", fontsize=FONT_PT)
    fig.supylabel("share of the data (%)", fontsize=FONT_PT)
    legend_on_top(fig, *zip(*entries, strict=True))
    return fig
