"""Decent-DP's Fig. 6 grid against per-iteration times someone else read: each cell's error and each trend.

Why: the grid (``reports/decentdp/fig6.csv``, 36 cells: T4 16/32/64, A100 8/16/32, A40 8/16/32 GPUs x All-Reduce,
SGP (Exp), Decent (Exp), Decent (AER)) is predicted from public specifications; only two of its cells are published
as numbers (the validation's points). The rest are read off the paper's bars by whoever checks the emulator from
outside, and those readings stay with them. This script makes their check one command, with the emulator's two
goals for the grid (the cells within 15 % at the median, each cluster's strong-scaling trend right) measured as
written here before anyone reads a bar, so the measure cannot be chosen after the numbers are seen:

* **a cell's error** is the validation's: ``(predicted - measured) / measured``; its signed form has + for predicted
  too fast (a time too short), as in ``benchmarks/validate_emulator.py``;
* **a trend** is one method on one cluster from its fewest GPUs to its most: the ratio of the per-iteration times,
  ``t(most) / t(fewest)``, named ``falls`` below 1 - :data:`FLAT`, ``rises`` above 1 + :data:`FLAT`, else ``flat``;
  the prediction's trend is right when it has the measurement's name. Only the counts both sides have are compared.
  How much flatter (+) or steeper (-) the predicted fall is, ``predicted ratio / measured ratio - 1``, is shown
  beside it, not judged.
  A cluster's trend is right when every method measured on it at two counts or more is.

The measured file is a CSV with a header ``setup,gpus,method,ms`` (the grid's names: ``t4-ib``, ``a100-ib``,
``a40-25gbe``; ``allreduce``, ``sgp-exp``, ``decent-exp``, ``decent-aer``); any subset of the cells.

    python benchmarks/fig6_check.py measured.csv                 # the table, the trends and the two goals
    python benchmarks/fig6_check.py measured.csv --json          # the same, for a script
    python benchmarks/fig6_check.py measured.csv --grid OTHER.csv   # another grid (a what-if's)
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
GRID = REPO / "reports" / "decentdp" / "fig6.csv"
#: a trend whose time ratio is within this of 1 is ``flat``
FLAT = 0.05
#: the goal on the cells' median absolute error
MEDIAN_GOAL = 0.15

Cell = tuple[str, int, str]


class InputError(ValueError):
    """A measured or grid file this script cannot read: the message names the file, the row and the field."""


@dataclass(frozen=True)
class Scored:
    cell: Cell
    predicted_ms: float
    measured_ms: float

    @property
    def error(self) -> float:
        return (self.predicted_ms - self.measured_ms) / self.measured_ms

    @property
    def signed(self) -> float:
        """+ = predicted too fast (a time too short), as the validation signs a time."""
        return -self.error


def read_cells(path: Path, value: str) -> dict[Cell, float]:
    """``setup,gpus,method,<value>`` rows of ``path`` by cell; a missing column, a bad number or a cell given twice
    is an :class:`InputError` naming the file and the row."""
    try:
        rows = list(csv.DictReader(path.read_text(encoding="utf-8").splitlines()))
    except OSError as exc:
        raise InputError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    out: dict[Cell, float] = {}
    for n, row in enumerate(rows, 2):  # the header is line 1
        missing = [k for k in ("setup", "gpus", "method", value) if not (row.get(k) or "").strip()]
        if missing:
            raise InputError(f"{path}, line {n}: no {', '.join(missing)} (columns: setup,gpus,method,{value})")
        try:
            cell = (row["setup"].strip(), int(row["gpus"]), row["method"].strip())
            ms = float(row[value])
        except ValueError:
            raise InputError(f"{path}, line {n}: gpus must be an integer and {value} a number") from None
        if not ms > 0:
            raise InputError(f"{path}, line {n}: {value} must be a positive time in ms, not {row[value]}")
        if cell in out:
            raise InputError(f"{path}, line {n}: the cell {cell} is given twice")
        out[cell] = ms
    return out


def score(grid: dict[Cell, float], measured: dict[Cell, float], measured_path: Path) -> list[Scored]:
    unknown = sorted(set(measured) - set(grid))
    if unknown:
        raise InputError(f"{measured_path}: cells the grid does not have: {unknown}")
    return [Scored(cell, grid[cell], ms) for cell, ms in sorted(measured.items())]


def trend_name(ratio: float) -> str:
    return "falls" if ratio < 1 - FLAT else "rises" if ratio > 1 + FLAT else "flat"


def trends(scored: list[Scored]) -> list[dict[str, Any]]:
    """One row per (cluster, method) measured at two GPU counts or more: both ratios, both names, right or not."""
    by: dict[tuple[str, str], list[Scored]] = {}
    for s in scored:
        by.setdefault((s.cell[0], s.cell[2]), []).append(s)
    rows = []
    for (setup, method), cells in sorted(by.items()):
        if len(cells) < 2:
            continue
        cells.sort(key=lambda s: s.cell[1])
        first, last = cells[0], cells[-1]
        predicted = last.predicted_ms / first.predicted_ms
        measured = last.measured_ms / first.measured_ms
        rows.append(
            {
                "setup": setup,
                "method": method,
                "gpus": [first.cell[1], last.cell[1]],
                "predicted_ratio": round(predicted, 3),
                "measured_ratio": round(measured, 3),
                # how much flatter (+) or steeper (-) the prediction is: shown, not part of the goal
                "ratio_error": round(predicted / measured - 1, 4),
                "predicted": trend_name(predicted),
                "measured": trend_name(measured),
                "right": trend_name(predicted) == trend_name(measured),
            }
        )
    return rows


def summary(scored: list[Scored]) -> dict[str, Any]:
    """The cells, the trends and the two goals."""
    if not scored:
        raise InputError("no measured cell to score")
    rows = trends(scored)
    by_cluster: dict[str, dict[str, Any]] = {}
    for c in sorted({s.cell[0] for s in scored}):
        errors = [abs(s.error) for s in scored if s.cell[0] == c]
        judged = [r["right"] for r in rows if r["setup"] == c]
        by_cluster[c] = {
            "cells": len(errors),
            "median_abs_error": round(statistics.median(errors), 4),
            "trend_right": all(judged) if judged else None,  # None: no method there at two GPU counts
        }
    median = statistics.median(abs(s.error) for s in scored)
    return {
        "cells": [
            {
                "setup": s.cell[0],
                "gpus": s.cell[1],
                "method": s.cell[2],
                "predicted_ms": s.predicted_ms,
                "measured_ms": s.measured_ms,
                "error": round(s.error, 4),
                "signed": round(s.signed, 4),
            }
            for s in scored
        ],
        "trends": rows,
        "clusters": by_cluster,
        "median_abs_error": round(median, 4),
        "median_signed_error": round(statistics.median(s.signed for s in scored), 4),
        "goals": {
            f"cells_median_within_{MEDIAN_GOAL:.0%}": median <= MEDIAN_GOAL,
            # None: no method was measured at two GPU counts, so no trend can be judged
            "every_cluster_trend_right": all(r["right"] for r in rows) if rows else None,
        },
        "sign": "error = (predicted - measured) / measured; signed: + = predicted too fast (a time too short)",
        "flat_within": FLAT,
    }


def render(result: dict[str, Any]) -> str:
    out = ["| cluster | GPUs | method | predicted ms | measured ms | error |", "|---|---:|---|---:|---:|---:|"]
    for c in result["cells"]:
        how = "too slow" if c["error"] > 0 else "too fast" if c["error"] < 0 else "exact"
        out.append(
            f"| {c['setup']} | {c['gpus']} | {c['method']} | {c['predicted_ms']:.1f} | {c['measured_ms']:.1f} "
            f"| {c['error']:+.1%} ({how}) |"
        )
    out += [
        "",
        "| cluster | method | GPUs | predicted t(most)/t(fewest) | measured | ratio error | right |",
        "|---|---|---|---|---|---|---|",
    ]
    if not result["trends"]:
        out.append("| (no method measured at two GPU counts) | | | | | | |")
    for r in result["trends"]:
        out.append(
            f"| {r['setup']} | {r['method']} | {r['gpus'][0]} → {r['gpus'][1]} | {r['predicted_ratio']} "
            f"({r['predicted']}) | {r['measured_ratio']} ({r['measured']}) | {r['ratio_error']:+.1%} "
            f"| {'yes' if r['right'] else 'no'} |"
        )
    out.append("")
    for name, c in result["clusters"].items():
        trend = {True: "right", False: "wrong", None: "not measured at two counts"}[c["trend_right"]]
        out.append(f"{name}: {c['cells']} cells, median |error| {c['median_abs_error']:.1%}, trend {trend}")
    out.append(
        f"all: {len(result['cells'])} cells, median |error| {result['median_abs_error']:.1%}, "
        f"median signed {result['median_signed_error']:+.1%} (+ = predicted too fast)"
    )
    out.append(f"goals: {result['goals']} (a trend is flat within ±{FLAT:.0%})")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("measured", type=Path, help="CSV: setup,gpus,method,ms (per-iteration times read elsewhere)")
    parser.add_argument(
        "--grid", type=Path, default=GRID, help=f"the predicted grid (default {GRID.relative_to(REPO)})"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    try:
        result = summary(score(read_cells(args.grid, "ms_per_iter"), read_cells(args.measured, "ms"), args.measured))
    except InputError as exc:
        print(f"fig6_check: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=1) if args.json else render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
