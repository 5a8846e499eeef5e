"""The published orderings of methods, checked on the validation's predictions.

Why a module of its own: ``benchmarks/validate_emulator.py`` scores the points; what a comparison of methods is (two
measured points, or a paper's stated ordering on the committed Fig. 6 grid) and whether the grid it reads is current
is this, apart from the scoring.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from validation_model import Outcome
from validation_paths import FIG6


def cell_figure(point: dict[str, Any]) -> str:
    """Where an engine cell's measurement was read: the point's own ``from`` (Fig. 7), a training log (a cell with
    its own workload), else Fig. 6."""
    return point.get("from") or ("training log" if "workload" in point else "Fig. 6")


def is_grid_cell(point: dict[str, Any]) -> bool:
    """Whether the point is one of Fig. 6's cells, so one of the committed grid's (``reports/decentdp/fig6.csv``)."""
    return point["kind"] == "engine_cell" and cell_figure(point) == "Fig. 6"


def orderings(data: dict[str, Any], outcomes: list[Outcome], fig6: Path = FIG6) -> list[dict[str, Any]]:
    """Each published comparison of methods, checked on the predictions: the measured pairs among the points, and
    the paper's stated orderings (``comparisons`` in the data file) on the Fig. 6 grid the current model built
    (``reports/decentdp/fig6.csv``; its cells that are also points here must equal the fresh predictions, so a
    stale grid fails instead of passing)."""
    out: list[dict[str, Any]] = []
    by_id = {o.point["id"]: o for o in outcomes}
    grid: dict[tuple[str, int, str], float] = {}
    if fig6.is_file():
        with fig6.open(encoding="utf-8") as fh:
            grid = {(r["setup"], int(r["gpus"]), r["method"]): float(r["ms_per_iter"]) for r in csv.DictReader(fh)}
    for o in outcomes:
        p = o.point
        if is_grid_cell(p):
            cell = grid.get((p["setup"], p["gpus"], p["method"]))
            fresh = cell is not None and abs(cell - o.predicted) <= 0.01 + 1e-3 * o.predicted
            out.append(
                {
                    "what": f"{fig6.name} cell {p['setup']}/{p['gpus']}/{p['method']} is current",
                    "right": fresh,
                    "detail": f"grid {cell} vs fresh {o.predicted:.2f} ms",
                }
            )
    for comp in data.get("comparisons", []):
        if "faster" in comp:  # two measured points: the faster must be predicted faster
            fast, slow = by_id[comp["faster"]], by_id[comp["slower"]]
            right = fast.predicted < slow.predicted
            detail = f"{fast.predicted:.1f} < {slow.predicted:.1f} ms predicted ({comp['source_says']})"
            out.append({"what": comp["what"], "right": right, "detail": detail})
            continue
        for setup, gpus in comp["cells"]:
            a = grid.get((setup, gpus, comp["faster_method"]))
            b = grid.get((setup, gpus, comp["slower_method"]))
            right = a is not None and b is not None and a < b
            detail = f"{comp['faster_method']} {a} < {comp['slower_method']} {b} ms ({comp['source_says']})"
            out.append({"what": f"{comp['what']} at {setup}/{gpus}", "right": right, "detail": detail})
    return out
