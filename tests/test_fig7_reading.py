"""``benchmarks/fig7_reading.py``: the span of each curve of a Fig. 7-like figure, read at pixel precision.

The test draws a figure like the authors' (three panels on a light-grey grid, the three methods in seaborn's line
colours, a legend in each panel) with curves of known extent and checks that the reader finds the panels and gives
the ratios of the curves' spans, so the validation point's reading (``decentdp-a40-16-complete``) can be re-made.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmark_module import benchmark_module

#: each curve's first and last x (in the figure's units): spans 25, 10 and 20, so 0.4 and 0.8 of All-Reduce's
EXTENTS = {"All-Reduce": (1.2, 26.2), "AccumAdam-AER": (0.5, 10.5), "AccumAdam-complete": (0.9, 20.9)}
#: the figure's line styles: solid, dashed, dotted
STYLES = {"All-Reduce": "-", "AccumAdam-AER": "--", "AccumAdam-complete": ":"}


def _figure(path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    reader = benchmark_module("fig7_reading")
    fig, axes = plt.subplots(1, 3, figsize=(15, 4), dpi=150)
    for panel, ax in enumerate(axes):
        ax.set_facecolor("white")
        ax.grid(True, color=(0.8, 0.8, 0.8), linewidth=1.2)
        for name, (a, b) in EXTENTS.items():
            colour = tuple(c / 255 for c in reader.CURVES[name])
            xs = [a + (b - a) * i / 19 for i in range(20)]
            ax.plot(
                xs,
                [3.7 - 0.03 * i - 0.1 * panel for i in range(20)],
                color=colour,
                linewidth=1.0,
                ls=STYLES[name],
                label=name,
            )
        ax.set_xlim(0, 28)
        ax.legend(loc="upper right")
    fig.savefig(path)
    plt.close(fig)


def test_the_reader_finds_three_panels_and_each_curves_span(tmp_path: Path) -> None:
    reader = benchmark_module("fig7_reading")
    png = tmp_path / "fig7.png"
    _figure(png)
    rgb = reader.read_rgb(png)
    assert len(reader.panel_columns(rgb)) == 3
    panels = reader.read_figure(rgb)
    assert [sorted(p) for p in panels] == [sorted(EXTENTS)] * 3
    got = reader.ratios(panels)
    assert got["AccumAdam-AER"] == pytest.approx(0.4, rel=0.02)
    assert got["AccumAdam-complete"] == pytest.approx(0.8, rel=0.02)


def test_the_table_scales_by_fig6s_all_reduce_cell(tmp_path: Path, capsys) -> None:
    reader = benchmark_module("fig7_reading")
    png = tmp_path / "fig7.png"
    _figure(png)
    assert reader.main([str(png), "--all-reduce-ms", "200"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "AccumAdam-complete" in line)
    assert float(row.strip("| ").split("|")[-1]) == pytest.approx(160.0, rel=0.02)


def test_an_unreadable_image_is_one_line_naming_it(tmp_path: Path) -> None:
    reader = benchmark_module("fig7_reading")
    bad = tmp_path / "not.png"
    bad.write_text("no image", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"not\.png: not a readable image"):
        reader.main([str(bad)])


def test_a_panel_missing_a_curve_pairs_the_others_within_their_own_panels() -> None:
    reader = benchmark_module("fig7_reading")
    span = reader.Span
    panels = [
        {"All-Reduce": span(0, 100), "AccumAdam-complete": span(0, 80)},
        {"AccumAdam-complete": span(0, 500)},  # its All-Reduce curve not found: the panel decides nothing
        {"All-Reduce": span(10, 210), "AccumAdam-complete": span(10, 170), "AccumAdam-AER": span(0, 80)},
    ]
    got = reader.ratios(panels)
    assert got["AccumAdam-complete"] == pytest.approx(0.8) and got["AccumAdam-AER"] == pytest.approx(0.4)
