"""ABBA-paired timings as a table: the order of one repetition, the pairing of the k-th runs of two variants, their
ratios and the Markdown table ``benchmarks/speed_work.py`` prints (a run is a dict: ``variant``, ``rep``, ``rc``,
``cpu_s``, ``wall_s``, ``load_start``, ``load_end``, and ``tests_passed`` for a pytest item).

Apart from the script that runs the checkouts so that this arithmetic is read, and tested, on its own."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any


def abba(variants: Sequence[str]) -> list[str]:
    """One repetition's order: the variants, then the same reversed (A B B A; A B C C B A)."""
    return [*variants, *reversed(variants)]


def pair_ratios(runs: Sequence[dict[str, Any]], base: str, other: str, key: str = "cpu_s") -> list[float]:
    """``base / other`` of ``key`` for the k-th run of each in every repetition (ABBA: two pairs a repetition);
    runs that failed are left out with their partner."""
    ratios = []
    for rep in sorted({r["rep"] for r in runs}):
        mine = [r for r in runs if r["rep"] == rep and r["rc"] == 0]
        for a, b in zip(
            [r for r in mine if r["variant"] == base], [r for r in mine if r["variant"] == other], strict=False
        ):
            ratios.append(a[key] / b[key])
    return ratios


def spread(values: Sequence[float]) -> tuple[float, float, float] | None:
    """Median, min and max, or None for no values."""
    return (statistics.median(values), min(values), max(values)) if values else None


def _fmt_ratio(r: tuple[float, float, float] | None) -> str:
    return "–" if r is None else f"**{r[0]:.2f}×** ({r[1]:.2f}-{r[2]:.2f})"


def _fmt_side(runs: Sequence[dict[str, Any]]) -> str:
    ok = [r for r in runs if r["rc"] == 0]
    failed = f", {len(runs) - len(ok)} failed" if len(ok) < len(runs) else ""
    if not ok:
        return f"failed ({len(runs)})"
    cpu, wall = (statistics.median(r[k] for r in ok) for k in ("cpu_s", "wall_s"))
    return f"{cpu:.1f} / {wall:.1f}{failed}"


def load_range(runs: Sequence[dict[str, Any]]) -> tuple[float, float, float, float]:
    """The 1-minute load average over the runs: lowest and highest at their starts, then at their ends."""
    starts, ends = [r["load_start"] for r in runs], [r["load_end"] for r in runs]
    return min(starts), max(starts), min(ends), max(ends)


def _tests_passed(runs: Sequence[dict[str, Any]], variants: tuple[str, str]) -> str:
    """For the pytest item, each side's count of passed tests (a subset that lost tests would be cheaper), else ''."""
    counts = [
        "/".join(str(n) for n in sorted({r["tests_passed"] for r in runs if r["variant"] == v and "tests_passed" in r}))
        for v in variants
    ]
    return f", tests passed: {counts[0]} → {counts[1]}" if any(counts) else ""


def rows(item_runs: dict[str, list[dict[str, Any]]], titles: dict[str, str]) -> list[dict[str, Any]]:
    """One row per item and after variant: medians of both sides, the paired ratios, the loads."""
    out = []
    for key, runs in item_runs.items():
        for variant in dict.fromkeys(r["variant"] for r in runs if r["variant"] != "before"):
            mine = [r for r in runs if r["variant"] in ("before", variant)]
            out.append(
                {
                    "item": key,
                    "title": titles[key]
                    + ("" if variant == "after" else f" — {variant.split(', ', 1)[1]}")
                    + _tests_passed(runs, ("before", variant)),
                    "variant": variant,
                    "before": _fmt_side([r for r in runs if r["variant"] == "before"]),
                    "after": _fmt_side([r for r in runs if r["variant"] == variant]),
                    "cpu_ratio": spread(pair_ratios(runs, "before", variant, "cpu_s")),
                    "wall_ratio": spread(pair_ratios(runs, "before", variant, "wall_s")),
                    "pairs": len(pair_ratios(runs, "before", variant)),
                    "load": load_range(mine),
                }
            )
    return out


def table(table_rows: Sequence[dict[str, Any]]) -> str:
    """The Markdown table: seconds are medians over runs, ratios before/after per ABBA pair."""
    out = [
        "| item | before: CPU / wall s | after: CPU / wall s | CPU before/after, median (range) | wall before/after "
        "| pairs | load start → end |",
        "|---|---|---|---|---|---:|---|",
    ]
    for r in table_rows:
        ls0, ls1, le0, le1 = r["load"]
        out.append(
            f"| {r['item']}: {r['title']} | {r['before']} | {r['after']} | {_fmt_ratio(r['cpu_ratio'])} "
            f"| {_fmt_ratio(r['wall_ratio']).replace('**', '')} | {r['pairs']} "
            f"| {ls0:.1f}-{ls1:.1f} → {le0:.1f}-{le1:.1f} |"
        )
    return "\n".join(out)
