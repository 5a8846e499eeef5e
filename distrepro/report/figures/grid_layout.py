"""A fixed layout for a grid of like panels, measured on a few of them instead of solved over all.

Why: matplotlib's constrained layout measures every text of every panel twice (each tick label's extent) before the
figure is drawn; a per-arm grid of A²CiD²'s 30 arms with 64 workers each holds about 4,000 tick labels, and that
measuring was 40 % of drawing and saving such a figure. The panels of a grid (:func:`figure_style.panel_grid`) are
alike: the same kind of ticks, one title line, the same axis labels; with shared axes only the outer panels carry
tick labels. So the margins are measured on the first and the last panel, the ones with the longest tick labels and
any with a legend beside it, the figure-wide texts (the legend on top, the axis labels of the grid) once each, and
the grid is placed with ``subplots_adjust``: the same content, sizes and legend, placed without the solver.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from matplotlib.figure import Figure

PAD_IN = 3 / 72  # constrained layout's default padding around each panel (h_pad, w_pad), in inches


def _margins(ax: Any, renderer: Any) -> tuple[float, float, float, float]:
    """How far ``ax``'s labels, title and legend reach beyond its frame (px): left, right, bottom, top."""
    tight = ax.get_tightbbox(renderer, for_layout_only=True)
    frame = ax.get_window_extent(renderer)
    return (frame.x0 - tight.x0, tight.x1 - frame.x1, frame.y0 - tight.y0, tight.y1 - frame.y1)


def _figure_texts(fig: Figure, renderer: Any) -> tuple[float, float, float]:
    """Room (px) the grid's own texts take: its y label on the left, its x label below, its legends above."""
    pad = PAD_IN * fig.dpi
    left = bottom = top = 0.0
    ylabel, xlabel = getattr(fig, "_supylabel", None), getattr(fig, "_supxlabel", None)
    if ylabel is not None and ylabel.get_text():
        left = ylabel.get_window_extent(renderer).width + 2 * pad
    if xlabel is not None and xlabel.get_text():
        bottom = xlabel.get_window_extent(renderer).height + 2 * pad
    for legend in fig.legends:
        top = max(top, legend.get_window_extent(renderer).height + 2 * pad)
    return left, bottom, top


def place_grid(fig: Figure, panels: Sequence[Any], cols: int) -> None:
    """Place the visible ``panels`` (row by row, ``cols`` to a row) with fixed margins, then fix the figure-wide
    texts around them; what constrained layout would do for a grid of like panels, without measuring them all."""
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]  # FigureCanvasAgg's (figure_style)
    pad = PAD_IN * fig.dpi
    width, height = fig.bbox.width, fig.bbox.height
    ylabel, xlabel = getattr(fig, "_supylabel", None), getattr(fig, "_supxlabel", None)
    if xlabel is not None:  # at the foot of the figure, centred (supxlabel's own place is 1 % of the height up)
        xlabel.set_y(pad / height)
        xlabel.set_verticalalignment("bottom")
    if ylabel is not None:
        ylabel.set_x(pad / width)
        ylabel.set_horizontalalignment("left")
    fig_left, fig_bottom, fig_top = _figure_texts(fig, renderer)
    for _ in range(2):  # a second pass: ticks placed for the first pass's panel size may reach further
        _adjust(fig, panels, cols, renderer, (fig_left, fig_bottom, fig_top))
    for legend in fig.legends:  # "outside upper center": just above the panels' titles, centred
        legend.set_bbox_to_anchor((0.5, 1.0 - pad / height), transform=fig.transFigure)
        legend.set_loc("upper center")


def _widest(panels: Sequence[Any]) -> tuple[int, int]:
    """The panels with the longest y and x tick labels (the timeline's ``w63`` beside a 4-worker arm's ``w3``):
    formatting a label is cheap, measuring it is not."""

    def longest(labels: Any) -> int:
        return max((len(t.get_text()) for t in labels), default=0)

    ys = [longest(ax.get_yticklabels()) for ax in panels]
    xs = [longest(ax.get_xticklabels()) for ax in panels]
    return ys.index(max(ys)), xs.index(max(xs))


def _adjust(fig: Figure, panels: Sequence[Any], cols: int, renderer: Any, room: tuple[float, float, float]) -> None:
    rows = -(-len(panels) // cols)
    measured = {0, len(panels) - 1, *_widest(panels)} | {i for i, ax in enumerate(panels) if ax.get_legend()}
    reach = [_margins(panels[i], renderer) for i in sorted(measured)]
    left, right, bottom, top = (max(0.0, *(m[k] for m in reach)) for k in range(4))
    pad = PAD_IN * fig.dpi
    width, height = fig.bbox.width, fig.bbox.height
    fig_left, fig_bottom, fig_top = room
    x0, x1 = fig_left + left + pad, width - right - pad
    y0, y1 = fig_bottom + bottom + pad, height - fig_top - top - pad
    gap_x, gap_y = left + right + 2 * pad, bottom + top + 2 * pad
    axis_w = (x1 - x0 - (cols - 1) * gap_x) / cols
    axis_h = (y1 - y0 - (rows - 1) * gap_y) / rows
    fig.subplots_adjust(
        left=x0 / width, right=x1 / width, bottom=y0 / height, top=y1 / height,
        wspace=gap_x / axis_w if cols > 1 else 0.0, hspace=gap_y / axis_h if rows > 1 else 0.0,
    )  # fmt: skip
