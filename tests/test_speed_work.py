"""``benchmarks/speed_work.py``: the parts that need no training, the checkouts or a second process:
the command lines it builds and its argument parsing."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest
from benchmark_module import benchmark_module

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.smoke


def _module() -> ModuleType:
    return benchmark_module("speed_work")


sw = _module()


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
