"""Where a figure's texts land once drawn: overlaps, texts cut off at the figure's edge, legends over data.

Shared by the report's figure tests (``tests/report``): each reads a figure drawn with a renderer (its
``savefig`` or ``canvas.draw``) and returns what a reader would find unreadable, named, so that a failing
assert says which text.
"""

from __future__ import annotations

import itertools
from typing import Any

from matplotlib.figure import Figure


def _drawn_ticklabels(ax: Any, which: str) -> list[Any]:
    """Tick labels matplotlib draws: the locator also returns ticks beyond the view limits, which it skips."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    lo, hi = sorted(axis.get_view_interval())
    eps = 1e-9 * max(1.0, hi - lo)
    locs = axis.get_majorticklocs()
    ticks = axis.get_major_ticks(len(locs))
    return [t.label1 for loc, t in zip(locs, ticks, strict=True) if lo - eps <= loc <= hi + eps]


def _texts(fig: Figure) -> list[tuple[str, Any]]:
    """Every visible, non-empty text whose overlap with another would make it unreadable."""
    out = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        texts = [*_drawn_ticklabels(ax, "x"), *_drawn_ticklabels(ax, "y"), ax.xaxis.label, ax.yaxis.label, ax.title]
        texts += [ax._left_title, ax._right_title]
        out += [(f"{ax.get_title(loc='left') or ax.get_title()}: {t.get_text()!r}", t) for t in texts]
    for leg in [*fig.legends, *(ax.get_legend() for ax in fig.axes)]:
        if leg is not None:
            out += [(f"legend {t.get_text()!r}", t) for t in leg.get_texts()]
    out += [(f"figure label {t.get_text()!r}", t) for t in (fig._supxlabel, fig._supylabel) if t is not None]
    return [(name, t) for name, t in out if t.get_visible() and t.get_text().strip()]


def overlapping_texts(fig: Figure, renderer: Any) -> list[tuple[str, str]]:
    boxes = [(name, t.get_window_extent(renderer)) for name, t in _texts(fig)]
    return [
        (a, b)
        for (a, ba), (b, bb) in itertools.combinations(boxes, 2)
        if min(ba.x1, bb.x1) - max(ba.x0, bb.x0) > 0.5 and min(ba.y1, bb.y1) - max(ba.y0, bb.y0) > 0.5
    ]


def texts_cut_off(fig: Figure, renderer: Any) -> list[str]:
    """Texts reaching past the figure's edge (cut off in the PNG)."""
    page = fig.bbox
    return [
        name
        for name, t in _texts(fig)
        if (b := t.get_window_extent(renderer)).x0 < page.x0 - 1
        or b.y0 < page.y0 - 1
        or b.x1 > page.x1 + 1
        or b.y1 > page.y1 + 1
    ]


def legends_over_data(fig: Figure, renderer: Any) -> list[str]:
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes)]
    return [
        f"legend {[t.get_text() for t in leg.get_texts()][:3]} over axes {ax.get_title(loc='left') or ax.get_title()}"
        for leg in legends
        if leg is not None
        for ax in fig.axes
        if ax.get_visible() and leg.get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))
    ]


def texts_outside(fig: Figure, renderer: Any) -> list[str]:
    """Every visible text artist of the figure (titles, labels, ticks, legend entries, annotations) whose window
    extent reaches past the figure's edge, by its text."""
    from matplotlib.text import Text

    page = fig.bbox
    ticks = {id(t) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis) for tick in axis.get_major_ticks()
             for t in (tick.label1, tick.label2)}  # fmt: skip
    drawn = {id(t) for ax in fig.axes for which in "xy" for t in _drawn_ticklabels(ax, which)}
    out = []
    for t in fig.findobj(Text):
        if not t.get_visible() or not t.get_text().strip() or (t.axes is not None and not t.axes.get_visible()):
            continue
        if id(t) in ticks and id(t) not in drawn:  # a tick beyond the view limits: matplotlib does not draw it
            continue
        b = t.get_window_extent(renderer)
        if b.x0 < page.x0 - 1 or b.y0 < page.y0 - 1 or b.x1 > page.x1 + 1 or b.y1 > page.y1 + 1:
            out.append(t.get_text())
    return out
