"""What every figure shares: saving, sizes that grow with the number of arms, grids, outside legends.

Two layouts scale from 2 to 30 arms. *Per-arm bars* are horizontal, arm names on the y axis and
the figure's height growing with the arm count, so names never collide however many there are.
*Per-arm panels* (timeline, breakdown, allocation) are a grid of at most four columns, so the
figure keeps a sensible aspect ratio instead of one row thousands of pixels wide. Figures use
matplotlib's constrained layout (a grid of like panels a fixed one measured on a few panels,
:mod:`~distrepro.report.figures.grid_layout`) and place legends outside the axes ("outside ..."
locations or beside the last panel of a row), so a legend never hides data or tick labels.

Arm-coloured artists carry ``gid="arm:<name>"``: the report's tests read the colours back from
the figures to check that an arm has one colour everywhere.
"""

from __future__ import annotations

import math
import re
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import seaborn as sns
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from distrepro.report.figures.grid_layout import place_grid
from distrepro.safe_write import write_with

SPAN_COLORS = {"compute": "#4C72B0", "comm": "#DD8452", "idle": "#C7C7C7"}
VERDICT_COLORS = {"PASS": "#2E7D32", "FAIL": "#C62828", "INCONCLUSIVE": "#8D6E00"}
DPI = 110
#: the smallest text in a figure, in points. report.html shows a figure at most MAX_SHOWN_PX wide (CSS px, 96 per
#: inch), so text of f points keeps f * DPI / 96 * min(1, MAX_SHOWN_PX / (width_in * DPI)) points on screen
#: (:func:`shown_pt`): at least f for a figure up to MAX_WIDTH_IN wide, which figures with many panels respect.
FONT_PT = 10.0
MAX_SHOWN_PX = 1168  # report.html: body max-width 1200 px less its padding
MAX_WIDTH_IN = MAX_SHOWN_PX / 96
ROW_IN = 0.33  # inches per arm in a horizontal bar chart (a 10-point label and a bar)
#: figures of like panels (:func:`panel_grid`) and their layout, placed by :func:`place_grid` when saved
_GRIDS: weakref.WeakKeyDictionary[Figure, tuple[list[Any], int]] = weakref.WeakKeyDictionary()
#: zlib level 3 instead of Pillow's 6: the same pixels, a third less encoding CPU, files at most ~15 % larger
_PNG = {"compress_level": 3}
_WORKER = re.compile(r"^worker/(\d+)/(clock_s|compute_s|comm_s|idle_s|bytes_sent)$")


def arm_gid(arm: str) -> str:
    return f"arm:{arm}"


_RC = {
    key: FONT_PT
    for key in (
        "font.size", "axes.labelsize", "axes.titlesize", "xtick.labelsize", "ytick.labelsize", "legend.fontsize",
        "legend.title_fontsize", "figure.titlesize", "figure.labelsize",
    )
}  # fmt: skip


def new_figure(width: float, height: float, constrained: bool = True) -> Figure:
    """A figure on its own Agg canvas, outside pyplot's registry: nothing global keeps it alive, so a report of many
    figures (or a figure whose drawing fails) leaves no open figures behind, and no display backend is needed.
    Without ``constrained`` it has no layout engine (a grid :func:`save` places itself)."""
    sns.set_theme(style="whitegrid", context="paper", rc=_RC)
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained" if constrained else None)
    FigureCanvasAgg(fig)
    return fig


def shown_pt(fontsize: float, width_in: float) -> float:
    """Points on screen of ``fontsize``-point text in a figure ``width_in`` inches wide shown in report.html."""
    return fontsize * DPI / 96 * min(1.0, MAX_SHOWN_PX / (width_in * DPI))


def cols_that_fit(panel_w: float, limit: int = 4) -> int:
    """The most panels of ``panel_w`` inches side by side that stay within :data:`MAX_WIDTH_IN`."""
    return max(1, min(limit, int(MAX_WIDTH_IN // panel_w)))


def save(fig: Figure, path: Path, within: Path) -> Path:
    """Write ``fig`` as PNG at ``path``, which must stay inside the folder ``within`` (the report's: a ``figures``
    folder that is a link leading elsewhere is refused, :mod:`distrepro.safe_write`). Constrained layout already
    fits every label and outside legend in the figure, so no ``bbox_inches="tight"`` (a second full draw, the
    larger part of a report's time).

    The layout is run here, once, and then fixed: ``savefig`` on a figure with a layout engine first draws the
    whole figure without rendering only to run that engine, then draws it again to render it; the same
    positions without the first draw, a third of a figure's cost (the engine removed, not left as matplotlib's
    placeholder, for which savefig would draw it once more)."""
    grid = _GRIDS.get(fig)
    engine = fig.get_layout_engine()
    if grid is not None:  # like panels: margins measured on a few (grid_layout), not solved over every text
        place_grid(fig, *grid)
    elif engine is not None and fig.axes:  # as Figure.draw runs it (a figure without axes has nothing to place)
        engine.execute(fig)
        # no engine at all: "none" leaves a placeholder engine, and savefig first draws any figure that has an
        # engine, placeholder included, without rendering (matplotlib >= 3.8): a whole draw of six report figures
        fig.set_layout_engine(None)
        if fig.get_layout_engine() is not None:  # rcParams asked for a layout (not ours): keep the placed one fixed
            fig.set_layout_engine("none")
    return write_with(within, path, lambda tmp: fig.savefig(tmp, dpi=DPI, format="png", pil_kwargs=_PNG))


def bars_height(n_arms: int, extra: float = 0.9) -> float:
    """Height (inches) of a horizontal bar chart with ``n_arms`` rows."""
    return max(2.6, extra + ROW_IN * n_arms)


def grid_shape(n: int, max_cols: int = 4) -> tuple[int, int]:
    """(rows, cols) for ``n`` per-arm panels: one column for a few, at most ``max_cols``."""
    cols = 1 if n <= 1 else 2 if n <= 4 else 3 if n <= 9 else max_cols
    cols = min(cols, max_cols, max(n, 1))
    return math.ceil(n / cols), cols


def panel_grid(
    n: int,
    panel_w: float,
    row_heights: Sequence[float],
    max_cols: int = 4,
    sharey: bool = False,
    top: float = 0.45,
    sharex: bool = False,
) -> tuple[Figure, list[Any]]:
    """A grid of ``n`` panels (row by row); rows may differ in height, unused cells are hidden; ``sharex`` puts
    every panel on one x scale (the timelines: time reads the same across arms)."""
    rows, cols = grid_shape(n, min(max_cols, cols_that_fit(panel_w)))
    heights = list(row_heights)[:rows]
    heights += [max(heights)] * (rows - len(heights))  # fewer columns fit than the caller planned: more rows
    fig = new_figure(panel_w * cols, sum(heights) + top, constrained=False)
    axes = fig.subplots(rows, cols, squeeze=False, sharex=sharex, sharey=sharey, gridspec_kw={"height_ratios": heights})
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    _GRIDS[fig] = (flat[:n], cols)
    return fig, flat[:n]


def arm_title(ax: Any, arm: str, color: str, text: str | None = None) -> None:
    """Panel title naming the arm, framed in the arm's colour (the link to the per-arm charts)."""
    title = ax.set_title(text or arm, fontsize=FONT_PT, loc="left")
    title.set_bbox({"facecolor": "white", "edgecolor": color, "linewidth": 2.0, "boxstyle": "round,pad=0.25"})
    title.set_gid(arm_gid(arm))


def legend_beside(ax: Any, handles: Sequence[Any], names: Sequence[str], title: str | None = None) -> Any:
    """A legend to the right of ``ax``, outside it (constrained layout makes room), columns as needed."""
    ncol = max(1, math.ceil(len(names) / 18))
    return ax.legend(
        handles, names, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=FONT_PT, ncol=ncol, title=title,
        title_fontsize=FONT_PT, frameon=False, borderaxespad=0.0,
    )  # fmt: skip


def legend_on_top(fig: Figure, handles: Sequence[Any], names: Sequence[str]) -> Any:
    ncol = min(len(names), 5)
    return fig.legend(handles, names, loc="outside upper center", ncol=ncol, fontsize=FONT_PT, frameon=False)


def finished(runs: pd.DataFrame, labels: Mapping[str, str]) -> pd.DataFrame:
    done = runs[(runs["status"] == "FINISHED") & runs["run_id"].isin(list(labels))]
    return done.assign(arm=done["run_id"].map(labels))


def worker_frame(done: pd.DataFrame) -> pd.DataFrame:
    """``worker/<r>/<field>`` as long rows (arm, rank, field, value; mean over seeds). An arm gets
    rows only for the workers it has: a 2-worker arm beside an 8-worker one shows 2 workers."""
    rows = []
    for col in done.columns:
        m = _WORKER.match(col)
        if m:
            for arm, v in done.groupby("arm")[col].mean().dropna().items():
                rows.append({"arm": arm, "rank": int(m.group(1)), "field": m.group(2), "value": v})
    return pd.DataFrame(rows, columns=["arm", "rank", "field", "value"])
