"""The emulator's validation as a picture: every published measurement's out-of-sample signed error, one marker per
source, against the number of GPUs (left) and per source with its median (right).

Why: the table's rows (one a point) hide where the model is wrong: a source whose points all sit on one side of
zero, an error that grows with the GPU count, one point far from the rest. A scatter shows it at a glance. Errors
beyond :data:`CLIP` are drawn at the edge with their value written beside them, so that one outlier does not
squeeze the rest into a line.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: the y-axis' half-range in percent; a point beyond it is drawn on the edge and labelled with its value
CLIP = 30.0
#: the goal on the signed median (percent), drawn as a band
GOAL_SIGNED = 2.0
MARKERS = "osD^v<>phX*P"


def _gpus(point: dict[str, Any]) -> int:
    """The GPUs a point ran on: a compute point is one GPU."""
    return int(point.get("gpus", 1))


def stamp(outcomes: Sequence[Any]) -> str:
    """What the figure shows, in words kept in the PNG's ``Description``: a test compares the committed figure's with
    a fresh validation, so a figure left behind by a model change fails CI."""
    errors = [o.signed for o in outcomes]
    return (
        f"{len(errors)} points, median abs {statistics.median(abs(e) for e in errors):.4f}, "
        f"median signed {statistics.median(errors):+.4f}"
    )


def plot(outcomes: Sequence[Any], path: Path, title: str = "") -> dict[str, int]:
    """Draw ``outcomes`` (each with ``point`` and ``signed``, + = predicted too fast) to the PNG ``path``, with
    :func:`stamp` as its description; returns how many points were drawn and how many were clipped to the edge."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sources = sorted({o.point["source"] for o in outcomes})
    style = {s: (MARKERS[i % len(MARKERS)], f"C{i % 10}") for i, s in enumerate(sources)}
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5.2), gridspec_kw={"width_ratios": [1.25, 1]})
    clipped = 0
    for axis in (left, right):
        axis.axhspan(-GOAL_SIGNED, GOAL_SIGNED, color="0.9", zorder=0)
        axis.axhline(0.0, color="0.4", lw=0.8, zorder=1)
        axis.set_ylim(-CLIP * 1.12, CLIP * 1.12)
        axis.grid(True, axis="y", color="0.85", lw=0.5)
    for row, source in enumerate(sources):
        mine = [o for o in outcomes if o.point["source"] == source]
        marker, colour = style[source]
        errors = [100.0 * o.signed for o in mine]
        shown = [max(-CLIP, min(CLIP, e)) for e in errors]
        gpus = [_gpus(o.point) * (1 + 0.04 * (row - len(sources) / 2)) for o in mine]  # a little apart
        left.scatter(gpus, shown, marker=marker, color=colour, s=22, alpha=0.8, label=source, zorder=3)
        right.scatter([row] * len(shown), shown, marker=marker, color=colour, s=22, alpha=0.6, zorder=3)
        right.plot([row - 0.3, row + 0.3], [statistics.median(errors)] * 2, color="k", lw=2, zorder=4)
        for o, e, x in zip(mine, errors, gpus, strict=True):
            if abs(e) > CLIP:
                clipped += 1
                edge = CLIP if e > 0 else -CLIP
                left.annotate(
                    f"{e:+.0f}% {o.point['id']}",
                    (x, edge),
                    fontsize=7,
                    xytext=(4, -10 if e > 0 else 4),
                    textcoords="offset points",
                )
    left.set_xscale("log", base=2)
    left.set_xlabel("GPUs")
    left.set_ylabel("signed error, % (+ = predicted too fast)")
    left.set_title("each point, out of sample, against its GPU count")
    left.legend(fontsize=7, ncol=2, loc="lower left")
    right.set_xticks(range(len(sources)), sources, rotation=40, ha="right", fontsize=8)
    right.set_title("per source: points and median (bar); grey: the ±2 % goal")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, metadata={"Description": stamp(outcomes)})
    plt.close(fig)
    return {"points": len(outcomes), "clipped": clipped}
