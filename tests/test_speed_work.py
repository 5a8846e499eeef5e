"""``benchmarks/speed_work.py``: the parts that need no training, the checkouts or a second process: the ABBA order,
the pairing and ratio arithmetic, the table, the command lines it builds and its argument parsing."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from benchmark_module import benchmark_module

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.smoke


def _module() -> ModuleType:
    return benchmark_module("speed_work")


sw = _module()


def _run(variant: str, rep: int, cpu: float, wall: float = 1.0, rc: int = 0, load: float = 1.0) -> dict[str, Any]:
    return {"variant": variant, "rep": rep, "cpu_s": cpu, "wall_s": wall, "rc": rc} | {
        "load_start": load,
        "load_end": load,
    }


def test_abba_runs_each_variant_twice_mirrored() -> None:
    assert sw.abba(["before", "after"]) == ["before", "after", "after", "before"]
    assert sw.abba(["A", "B", "C"]) == ["A", "B", "C", "C", "B", "A"]


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
    assert sw.pair_ratios(runs, "before", "after") == pytest.approx([2.0, 3.0, 3.0, 1.0])
    assert sw.spread(sw.pair_ratios(runs, "before", "after")) == pytest.approx((2.5, 1.0, 3.0))


def test_a_failed_run_drops_its_pair_not_the_others() -> None:
    runs = [_run("before", 0, 10.0), _run("after", 0, 5.0, rc=1), _run("after", 0, 4.0), _run("before", 0, 12.0)]
    # the failed first "after" is gone: the first "before" pairs with the second "after"; the second "before" is alone
    assert sw.pair_ratios(runs, "before", "after") == pytest.approx([2.5])
    assert sw.spread([]) is None


def test_rows_give_one_row_per_after_variant_against_the_same_before() -> None:
    order = sw.abba(["before", "after, batched off", "after, batched auto"])
    cpu = {"before": 12.0, "after, batched off": 6.0, "after, batched auto": 4.0}
    runs = [_run(v, 0, cpu[v], wall=2 * cpu[v], load=float(k)) for k, v in enumerate(order)]
    rows = sw.rows({"b": runs}, {"b": "decentdp cell"})
    assert [r["variant"] for r in rows] == ["after, batched off", "after, batched auto"]
    assert [r["title"] for r in rows] == ["decentdp cell — batched off", "decentdp cell — batched auto"]
    assert [r["cpu_ratio"] for r in rows] == [pytest.approx((2.0, 2.0, 2.0)), pytest.approx((3.0, 3.0, 3.0))]
    assert [r["pairs"] for r in rows] == [2, 2]
    assert rows[0]["before"] == "12.0 / 24.0" and rows[1]["after"] == "4.0 / 8.0"
    assert rows[1]["load"] == (0.0, 5.0, 0.0, 5.0)  # its runs only: before at 0 and 5, auto at 2 and 3
    text = sw.table(rows)
    assert "| b: decentdp cell — batched auto | 12.0 / 24.0 | 4.0 / 8.0 | **3.00×** (3.00-3.00) |" in text
    assert len(text.splitlines()) == 4


def test_a_side_whose_every_run_failed_says_so() -> None:
    runs = [_run("before", 0, 10.0, rc=1), _run("after", 0, 5.0), _run("after", 0, 5.0), _run("before", 0, 9, rc=2)]
    (row,) = sw.rows({"d": runs}, {"d": "one-step run"})
    assert row["before"] == "failed (2)" and row["cpu_ratio"] is None and row["pairs"] == 0
    assert "| – |" in sw.table([row])


def test_only_selects_items_by_prefix_and_refuses_unknown_ones() -> None:
    keys = ["a1", "a2", "b", "c", "d", "e"]
    assert sw.select(keys, None) == keys
    assert sw.select(keys, "a,d") == ["a1", "a2", "d"]
    assert sw.select(keys, "e, a2") == ["a2", "e"]
    with pytest.raises(ValueError, match="no item z"):
        sw.select(keys, "b,z")


def test_arguments_parse_and_bad_ones_exit_with_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = tmp_path / "before"
    args = sw.parse_args(["--reps", "1", "--steps", "2", "--only", "b,d", "--before", str(before)])
    assert (args.reps, args.steps, args.items, args.before) == (1, 2, ["b", "d"], before)
    assert sw.parse_args([]).items == ["a1", "a2", "b", "c", "d", "e"] and sw.parse_args([]).after == REPO
    for bad in (["--only", "x"], ["--reps", "0"]):
        with pytest.raises(SystemExit):
            sw.parse_args(bad)
    assert "--only: no item x" in capsys.readouterr().err


def test_the_commands_cut_the_budget_and_vary_only_the_after_side_of_b() -> None:
    items = {i.key: i for i in sw.items(7, "acid", ["tests/a.py"])}
    assert "budget={steps: 7}" in items["a1"].args and "ar-16" in items["a1"].args
    assert "g64-base-r1" in items["a2"].args and "--jobs" in items["a2"].args
    assert items["a1"].after == (("after", ()),)
    assert [extra for _, extra in items["b"].after] == [
        ("--set", "batched_replicas=false"),
        ("--set", "batched_replicas=auto"),
    ]
    assert not any("batched" in a for a in items["b"].args)  # the before checkout has no such field
    assert items["c"].args[:3] == ("distrepro.cli", "report", "acid") and items["c"].store == "report"
    assert items["e"].args[0] == "pytest" and items["e"].args[-1] == "tests/a.py"


def test_each_side_runs_its_own_checkout_with_its_own_bytecode_cache(tmp_path: Path) -> None:
    side = sw.Side("before", tmp_path / "co", tmp_path / "work", sys.executable)
    env = side.env(tmp_path / "store")
    assert env["PYTHONPATH"] == str(tmp_path / "co")
    assert env["PYTHONPYCACHEPREFIX"] == str(tmp_path / "work" / "pycache")
    assert env["MLFLOW_TRACKING_URI"] == f"sqlite:///{tmp_path / 'store'}/mlflow.db"
    assert "PYTHONDONTWRITEBYTECODE" not in env and "OMP_WAIT_POLICY" not in env


def test_a_timed_run_counts_the_cpu_of_the_children_it_waited_for(tmp_path: Path) -> None:
    """The child burns CPU in a grandchild (about 0.2 s; the child alone uses 0.02 s): wait4 counts it as
    /usr/bin/time does."""
    burn = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'sum(range(10_000_000))']); sys.exit(3)"
    run = sw.timed([sys.executable, "-c", burn], tmp_path, {}, tmp_path / "log", timeout=60)
    assert run["rc"] == 3 and run["cpu_s"] > 0.1 and run["wall_s"] > 0


def test_a_run_past_its_time_limit_is_killed_with_what_it_started(tmp_path: Path) -> None:
    sleeper = "import subprocess; subprocess.run(['sleep', '30'])"
    run = sw.timed([sys.executable, "-c", sleeper], tmp_path, {}, tmp_path / "log", timeout=0.3)
    assert run["rc"] == -9 and run["wall_s"] < 20


def test_the_pytest_row_names_each_sides_count_of_passed_tests() -> None:
    runs = [{**_run(v, 0, 2.0), "tests_passed": n} for v, n in (("before", 92), ("after", 90), ("after", 90))]
    (row,) = sw.rows({"e": runs}, {"e": "pytest subset"})
    assert row["title"] == "pytest subset, tests passed: 92 → 90"
