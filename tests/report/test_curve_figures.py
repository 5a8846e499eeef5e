"""Quality curves tell arms apart by more than colour: each arm its own (colour, line style), neighbours in the
report order also differing in line style and marker; axes in words with units; the legend beside the data."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from figure_text import legends_over_data, texts_outside
from matplotlib.colors import to_hex

from distrepro import metrics as M
from distrepro.report.figures import arm_style, curves_figure


def _curves(arms: list[str]) -> tuple[pd.DataFrame, dict[str, str]]:
    """Two seeds per arm, every arm on the same curve (the worst case: lines drawn on top of one another)."""
    rows, labels = [], {}
    for arm in arms:
        for seed in range(2):
            run = f"{arm}-{seed}"
            labels[run] = arm
            for k, t in enumerate(np.linspace(0, 30, 12)):
                rows.append({"run_id": run, M.EMULATED_S: t, M.EPOCH: k / 4, M.VAL_ACCURACY: 0.5 + 0.03 * k,
                             M.VAL_LOSS: 2.0 / (k + 1)})  # fmt: skip
    return pd.DataFrame(rows), labels


def test_no_two_arms_share_colour_and_line_style() -> None:
    arms = ["const", "qsr", "linear", "gamma3", "postlocal", "parallel", "const-16gpu", "qsr-16gpu", "a", "b", "c"]
    curves, labels = _curves(arms)
    style = arm_style(arms)
    fig = curves_figure(curves, labels, style, M.EMULATED_S)
    assert fig is not None
    lines = [ln for ax in fig.axes for ln in ax.get_lines() if str(ln.get_gid() or "").startswith("arm:")]
    per_panel: dict[int, list[tuple[str, str, str]]] = {}
    for ln in lines:
        per_panel.setdefault(id(ln.axes), []).append((to_hex(ln.get_color()), ln.get_linestyle(), ln.get_marker()))
    for drawn in per_panel.values():
        assert len(drawn) == len(arms)
        assert len({(c, ls) for c, ls, _ in drawn}) == len(arms)  # no two arms share (colour, line style)
        for (_, ls1, m1), (_, ls2, m2) in itertools.pairwise(drawn):
            assert ls1 != ls2 and m1 != m2  # neighbours differ in line style and marker, whatever their hues
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    assert legends_over_data(fig, renderer) == [] and texts_outside(fig, renderer) == []
    ylabels = [ax.get_ylabel() for ax in fig.axes]
    assert ylabels == ["validation accuracy (%)", "validation loss (nats)"]
    assert fig.axes[0].get_xlabel() == "emulated time (s)"
    assert max(lines[0].get_ydata()) > 1  # accuracy drawn in per cent, as its axis says
