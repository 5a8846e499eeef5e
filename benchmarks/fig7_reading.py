"""Decent-DP's Fig. 7 read at pixel precision: how long each method's curve runs, and the cell it gives.

Why: Fig. 7 (four 4xA40 nodes on 25 GbE, Transformer-base) plots validation metrics against wall time for
All-Reduce, AccumAdam on the alternating exponential ring (AER) and AccumAdam on the complete topology; Fig. 6 gives
per-iteration times for the first two only. Every curve has one point an epoch over the same epochs, so the ratio of
two curves' spans (first point to last) is the ratio of their times per iteration, whatever the axis' scale. Times
Fig. 6's All-Reduce cell (195.5 ms), the complete curve's span is a per-iteration time nobody tabulated: the
validation point ``decentdp-a40-16-complete`` (``benchmarks/data/emulator_points.yaml``; docs/emulator.md, "Fig. 7's
complete cell"). The image is the authors' (github.com/WangZesen/Decentralized-Training-Exp @ 6817039,
``images/transformer_generalization_vs_runtime.png``, the paper's Fig. 7 with its caption): fetch it and pass its
path; it is not copied here.

How: a curve is the pixels within a colour distance of its line colour (seaborn's default palette, as the figure
uses), its dashes joined, and the largest such group (a legend's sample line is another); the three panels are the
runs of columns the horizontal gridlines cross. Each panel gives each curve's first and last x; the reading is the
median over panels. A solid line's caps reach half its width past its ends (about 3 px in the authors' image, 0.5 %
of All-Reduce's span), a dashed one may end in a gap: the reading holds to about 1 %.

    python benchmarks/fig7_reading.py transformer_generalization_vs_runtime.png
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: the curves' line colours (seaborn's "deep" palette: blue, orange, green), by the figure's legend
CURVES = {"All-Reduce": (76, 114, 176), "AccumAdam-AER": (221, 132, 82), "AccumAdam-complete": (85, 168, 104)}
#: largest sum of absolute RGB differences a line pixel has from its colour (a band's tint is far outside it)
COLOUR_TOLERANCE = 60
#: Fig. 6, A40 / 25 GbE, 16 GPUs, All-Reduce: ms per iteration (the one Fig. 6 cell the repo's claims read)
ALL_REDUCE_MS = 195.5
#: pixels a curve's dashes and dots are dilated by to join them into one group (a dotted line's gaps are a few
#: line widths; the legend sits farther from its curve)
JOIN = 6


@dataclass(frozen=True)
class Span:
    """One curve in one panel: its first and last pixel column."""

    first: int
    last: int

    @property
    def pixels(self) -> int:
        return self.last - self.first


def read_rgb(path: Path) -> np.ndarray:
    """The image as an int array (rows, columns, RGB); a one-line error naming the file if it cannot be read."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            return np.asarray(im.convert("RGB")).astype(int)
    except (OSError, UnidentifiedImageError) as exc:
        raise SystemExit(f"{path}: not a readable image ({exc})") from None


def panel_columns(
    rgb: np.ndarray, grey: tuple[int, int, int] = (204, 204, 204), min_width: int = 100
) -> list[tuple[int, int]]:
    """The panels' column ranges: each panel's horizontal gridlines (light grey) cross every column inside it and
    none between panels, so a panel is a run of columns that meet at least three grey pixels."""
    mask = np.abs(rgb - np.array(grey)).sum(axis=2) < 30
    inside = np.concatenate([[False], mask.sum(axis=0) >= 3, [False]])
    edges = np.flatnonzero(np.diff(inside.astype(int)))
    panels = [(int(a), int(b) - 1) for a, b in zip(edges[::2], edges[1::2], strict=True) if b - a >= min_width]
    if not panels:
        raise SystemExit("no panel with gridlines found: is this the Fig. 7 image?")
    return panels


def curve_span(rgb: np.ndarray, colour: tuple[int, int, int], columns: tuple[int, int]) -> Span | None:
    """The curve's first and last column within ``columns``; None if it is absent. The curve is the largest group of
    its colour's pixels once dashes and dots are joined (a dilation of ``JOIN`` pixels): a legend's sample line is a
    group of its own, apart from the curve."""
    from scipy import ndimage

    mask = np.abs(rgb - np.array(colour)).sum(axis=2) < COLOUR_TOLERANCE
    mask[:, : columns[0]] = False
    mask[:, columns[1] + 1 :] = False
    if not mask.any():
        return None
    joined = ndimage.binary_dilation(mask, structure=np.ones((2 * JOIN + 1, 2 * JOIN + 1), dtype=bool))
    groups, count = ndimage.label(joined)
    sizes = ndimage.sum(mask, groups, index=range(1, count + 1))
    curve = mask & (groups == 1 + int(np.argmax(sizes)))
    xs = np.where(curve.any(axis=0))[0]
    return Span(int(xs[0]), int(xs[-1]))


def read_figure(rgb: np.ndarray) -> list[dict[str, Span]]:
    """Per panel, each curve's span where it is drawn."""
    panels = []
    for columns in panel_columns(rgb):
        spans = {name: curve_span(rgb, colour, columns) for name, colour in CURVES.items()}
        panels.append({name: span for name, span in spans.items() if span is not None and span.pixels > 0})
    return panels


def ratios(panels: list[dict[str, Span]], reference: str = "All-Reduce") -> dict[str, float]:
    """Each curve's span over the reference's in the same panel, the median over the panels holding both."""
    out = {}
    for name in CURVES:
        pairs = [p[name].pixels / p[reference].pixels for p in panels if name in p and reference in p]
        if pairs:
            out[name] = statistics.median(pairs)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("image", type=Path, help="the authors' transformer_generalization_vs_runtime.png (Fig. 7)")
    parser.add_argument("--all-reduce-ms", type=float, default=ALL_REDUCE_MS,
                        help="Fig. 6's All-Reduce cell, ms per iteration (default: %(default)s)")  # fmt: skip
    args = parser.parse_args(argv)
    panels = read_figure(read_rgb(args.image))
    print("| curve | span per panel (pixels) | / All-Reduce (median) | ms per iteration |")
    print("|---|---|---:|---:|")
    for name, ratio in ratios(panels).items():
        per_panel = " / ".join(str(p[name].pixels) if name in p else "-" for p in panels)
        print(f"| {name} | {per_panel} | {ratio:.3f} | {ratio * args.all_reduce_ms:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
