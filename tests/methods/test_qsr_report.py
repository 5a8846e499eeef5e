"""QSR's schedule figure (methods/qsr/report.py) keeps schedules apart where they coincide and its legend off them."""

from __future__ import annotations

import itertools

from figure_text import legends_over_data, texts_outside
from matplotlib.colors import to_hex

from distrepro.plugins.registry import plugin_module

report = plugin_module("qsr", "report")


def _plan(lengths: list[int]) -> dict[str, dict[str, list[int]]]:
    return {"method_plan": {"round_lengths": lengths}}


def test_coinciding_schedules_differ_in_colour_and_line_style() -> None:
    # every schedule holds H = 2 through the warm-up: the lines lie on one another there
    plans = {name: _plan([2] * 40 + [2 + k] * 10) for k, name in enumerate(["const", "qsr", "linear", "gamma3", "p"])}
    fig = report.schedule_figure(plans, "H per round")
    ax = fig.axes[0]
    steps = [ln for ln in ax.get_lines() if ln.get_linestyle() != "None"]
    assert len(steps) == len(plans)
    assert len({(to_hex(ln.get_color()), ln.get_linestyle()) for ln in steps}) == len(plans)
    assert all(a.get_linestyle() != b.get_linestyle() for a, b in itertools.pairwise(steps))
    legend = ax.get_legend()
    assert next(t.get_text() for t in legend.get_texts()) == "const (50 rounds)"
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    assert legends_over_data(fig, renderer) == [] and texts_outside(fig, renderer) == []
