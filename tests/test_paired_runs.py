"""``benchmarks/paired_runs.py``: the ABBA order, the pairing of the k-th runs, its ratios, the rows, the table."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
from benchmark_module import benchmark_module

pytestmark = pytest.mark.smoke


def _module() -> ModuleType:
    return benchmark_module("paired_runs")


pr = _module()


def _run(variant: str, rep: int, cpu: float, wall: float = 1.0, rc: int = 0, load: float = 1.0) -> dict[str, Any]:
    return {"variant": variant, "rep": rep, "cpu_s": cpu, "wall_s": wall, "rc": rc} | {
        "load_start": load,
        "load_end": load,
    }


def test_abba_runs_each_variant_twice_mirrored() -> None:
    assert pr.abba(["before", "after"]) == ["before", "after", "after", "before"]
    assert pr.abba(["A", "B", "C"]) == ["A", "B", "C", "C", "B", "A"]


def test_pairs_are_the_kth_runs_of_each_variant_within_a_repetition() -> None:
    runs = [
        _run("before", 0, 10.0),
        _run("after", 0, 5.0),
        _run("after", 0, 4.0),
        _run("before", 0, 12.0),
        _run("before", 1, 9.0),
        _run("after", 1, 3.0),
        _run("after", 1, 6.0),
        _run("before", 1, 6.0),
    ]
    assert pr.pair_ratios(runs, "before", "after") == pytest.approx([2.0, 3.0, 3.0, 1.0])
    assert pr.spread(pr.pair_ratios(runs, "before", "after")) == pytest.approx((2.5, 1.0, 3.0))


def test_a_failed_run_drops_its_pair_not_the_others() -> None:
    runs = [_run("before", 0, 10.0), _run("after", 0, 5.0, rc=1), _run("after", 0, 4.0), _run("before", 0, 12.0)]
    # the failed first "after" is gone: the first "before" pairs with the second "after"; the second "before" is alone
    assert pr.pair_ratios(runs, "before", "after") == pytest.approx([2.5])
    assert pr.spread([]) is None


def test_rows_give_one_row_per_after_variant_against_the_same_before() -> None:
    order = pr.abba(["before", "after, batched off", "after, batched auto"])
    cpu = {"before": 12.0, "after, batched off": 6.0, "after, batched auto": 4.0}
    runs = [_run(v, 0, cpu[v], wall=2 * cpu[v], load=float(k)) for k, v in enumerate(order)]
    rows = pr.rows({"b": runs}, {"b": "decentdp cell"})
    assert [r["variant"] for r in rows] == ["after, batched off", "after, batched auto"]
    assert [r["title"] for r in rows] == ["decentdp cell — batched off", "decentdp cell — batched auto"]
    assert [r["cpu_ratio"] for r in rows] == [pytest.approx((2.0, 2.0, 2.0)), pytest.approx((3.0, 3.0, 3.0))]
    assert [r["pairs"] for r in rows] == [2, 2]
    assert rows[0]["before"] == "12.0 / 24.0" and rows[1]["after"] == "4.0 / 8.0"
    assert rows[1]["load"] == (0.0, 5.0, 0.0, 5.0)  # its runs only: before at 0 and 5, auto at 2 and 3
    text = pr.table(rows)
    assert "| b: decentdp cell — batched auto | 12.0 / 24.0 | 4.0 / 8.0 | **3.00×** (3.00-3.00) |" in text
    assert len(text.splitlines()) == 4


def test_a_side_whose_every_run_failed_says_so() -> None:
    runs = [_run("before", 0, 10.0, rc=1), _run("after", 0, 5.0), _run("after", 0, 5.0), _run("before", 0, 9, rc=2)]
    (row,) = pr.rows({"d": runs}, {"d": "one-step run"})
    assert row["before"] == "failed (2)" and row["cpu_ratio"] is None and row["pairs"] == 0
    assert "| – |" in pr.table([row])


def test_the_pytest_row_names_each_sides_count_of_passed_tests() -> None:
    runs = [{**_run(v, 0, 2.0), "tests_passed": n} for v, n in (("before", 92), ("after", 90), ("after", 90))]
    (row,) = pr.rows({"e": runs}, {"e": "pytest subset"})
    assert row["title"] == "pytest subset, tests passed: 92 → 90"
