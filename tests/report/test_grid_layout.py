"""A grid of like panels is placed from a few measured panels, and every text still fits, unhidden."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from figure_text import legends_over_data, overlapping_texts, texts_cut_off
from matplotlib.axes import Axes
from matplotlib.patches import Patch

from distrepro.report.figures import grid_layout
from distrepro.report.figures.figure_style import legend_on_top, panel_grid, save


def _grid(ranks: list[int]) -> Any:
    """A timeline-like grid: panels of a few or many workers (short and long tick labels), shared x, a legend and
    labels for the whole grid."""
    fig, axes = panel_grid(len(ranks), 4.3, [0.75 + 0.2 * max(ranks)] * 5, max_cols=2, sharex=True)
    for i, (ax, n) in enumerate(zip(axes, ranks, strict=True)):
        ax.barh(range(n), [1.0 + i] * n)
        ax.set_yticks(range(n), [f"{'worker ' * (n // 4)}{r}" for r in range(n)])  # longer where more
        ax.set_title(f"arm {i}", loc="left")
    fig.supxlabel("emulated time (ms)")
    fig.supylabel("worker")
    legend_on_top(fig, [Patch(color=c) for c in ("C0", "C1", "C2")], ["compute", "comm", "idle"])
    return fig, axes


def test_a_grid_is_placed_without_the_solver_and_its_texts_fit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    measured: list[Axes] = []
    tight = Axes.get_tightbbox

    def counted(self: Axes, *args: Any, **kwargs: Any) -> Any:
        measured.append(self)
        return tight(self, *args, **kwargs)

    monkeypatch.setattr(Axes, "get_tightbbox", counted)
    fig, axes = _grid([2, 2, 12, 2, 2, 3, 2, 2, 3, 2])  # the widest labels in a middle panel
    assert fig.get_layout_engine() is None
    save(fig, tmp_path / "grid.png", tmp_path)
    assert len(set(measured)) <= 4 < len(axes)  # the first, the last and the widest, not every panel
    renderer = fig.canvas.get_renderer()
    assert texts_cut_off(fig, renderer) == []
    assert overlapping_texts(fig, renderer) == []
    assert legends_over_data(fig, renderer) == []


def test_measuring_only_the_first_and_last_panels_would_cut_the_widest_labels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check above is not vacuous: a middle panel's longer labels, left unmeasured, run off the figure."""
    monkeypatch.setattr(grid_layout, "_widest", lambda panels: (0, 0))
    fig, _ = _grid([2, 2, 12, 2, 2, 3, 2, 2, 3, 2])
    save(fig, tmp_path / "grid.png", tmp_path)
    assert texts_cut_off(fig, fig.canvas.get_renderer()) != []
