"""The Fig. 6 held-out check (``benchmarks/fig6_check.py``): a cell's error as the validation signs it, a trend's
name from its time ratio, the goals, and bad files refused with the file and the line."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from benchmark_module import benchmark_module

pytestmark = pytest.mark.smoke

GRID = """setup,gpus,method,ms_per_iter,steps
t4-ib,16,allreduce,100.0,8
t4-ib,32,allreduce,80.0,8
t4-ib,64,allreduce,78.0,8
t4-ib,16,decent-aer,90.0,8
t4-ib,64,decent-aer,45.0,8
a40-25gbe,16,allreduce,200.0,8
"""


@pytest.fixture
def check() -> ModuleType:
    return benchmark_module("fig6_check")


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _result(check: ModuleType, tmp_path: Path, measured: str) -> dict:
    grid = check.read_cells(_write(tmp_path, "grid.csv", GRID), "ms_per_iter")
    path = _write(tmp_path, "measured.csv", "setup,gpus,method,ms\n" + measured)
    return check.summary(check.score(grid, check.read_cells(path, "ms"), path))


def test_a_cells_error_is_signed_as_the_validation_signs_a_time(check: ModuleType, tmp_path: Path) -> None:
    result = _result(check, tmp_path, "a40-25gbe,16,allreduce,250\nt4-ib,16,allreduce,80\n")
    cells = {(c["setup"], c["gpus"]): c for c in result["cells"]}
    assert cells[("a40-25gbe", 16)]["error"] == -0.2 and cells[("a40-25gbe", 16)]["signed"] == 0.2  # too fast
    assert cells[("t4-ib", 16)]["error"] == 0.25 and cells[("t4-ib", 16)]["signed"] == -0.25  # too slow
    assert result["median_abs_error"] == pytest.approx(0.225)
    assert result["goals"] == {"cells_median_within_15%": False, "every_cluster_trend_right": None}


def test_a_trend_is_named_by_its_time_ratio_and_judged_by_name(check: ModuleType, tmp_path: Path) -> None:
    # All-Reduce: predicted 100 -> 78 (falls, 0.78); measured 120 -> 60 (falls): right, whatever the steepness.
    # AER: predicted 90 -> 45 (falls); measured 50 -> 51 (flat within 5 %): wrong.
    measured = "t4-ib,16,allreduce,120\nt4-ib,64,allreduce,60\nt4-ib,16,decent-aer,50\nt4-ib,64,decent-aer,51\n"
    result = _result(check, tmp_path, measured)
    rows = {r["method"]: r for r in result["trends"]}
    assert rows["allreduce"]["predicted"] == rows["allreduce"]["measured"] == "falls" and rows["allreduce"]["right"]
    assert rows["allreduce"]["gpus"] == [16, 64] and rows["allreduce"]["predicted_ratio"] == 0.78
    assert rows["allreduce"]["ratio_error"] == pytest.approx(0.78 / 0.5 - 1)  # flatter than measured: shown only
    assert rows["decent-aer"]["measured"] == "flat" and not rows["decent-aer"]["right"]
    assert result["clusters"]["t4-ib"]["trend_right"] is False
    assert result["goals"]["every_cluster_trend_right"] is False
    assert [check.trend_name(r) for r in (0.94, 0.96, 1.04, 1.06)] == ["falls", "flat", "flat", "rises"]


def test_only_the_counts_measured_enter_a_trend(check: ModuleType, tmp_path: Path) -> None:
    """The 32-GPU cell the grid has but the reading lacks does not enter the All-Reduce trend (16 -> 32 here)."""
    result = _result(check, tmp_path, "t4-ib,16,allreduce,100\nt4-ib,32,allreduce,70\n")
    (row,) = result["trends"]
    assert row["gpus"] == [16, 32] and row["predicted_ratio"] == 0.8 and row["measured_ratio"] == 0.7
    assert result["goals"] == {"cells_median_within_15%": True, "every_cluster_trend_right": True}


def test_the_committed_grid_gives_the_validations_errors_on_its_two_points(check: ModuleType, tmp_path: Path) -> None:
    """The two cells Fig. 6 publishes as numbers (195.5 and 78.9 ms) score as ``validate_emulator.py`` scores them."""
    grid = check.read_cells(check.GRID, "ms_per_iter")
    path = _write(
        tmp_path, "m.csv", "setup,gpus,method,ms\na40-25gbe,16,allreduce,195.5\na40-25gbe,16,decent-aer,78.9\n"
    )
    result = check.summary(check.score(grid, check.read_cells(path, "ms"), path))
    errors = [c["error"] for c in result["cells"]]
    expected = [grid[("a40-25gbe", 16, "allreduce")] / 195.5 - 1, grid[("a40-25gbe", 16, "decent-aer")] / 78.9 - 1]
    assert errors == [pytest.approx(e, abs=1e-4) for e in expected]
    assert len(grid) == 36


@pytest.mark.parametrize(
    ("measured", "says"),
    [
        ("setup,gpus,method\nt4-ib,16,allreduce\n", "line 2: no ms"),
        ("setup,gpus,method,ms\nt4-ib,sixteen,allreduce,100\n", "line 2: gpus must be an integer"),
        ("setup,gpus,method,ms\nt4-ib,16,allreduce,0\n", "line 2: ms must be a positive time"),
        ("setup,gpus,method,ms\nt4-ib,16,allreduce,100\nt4-ib,16,allreduce,90\n", "line 3: the cell"),
        ("setup,gpus,method,ms\nt4-ib,128,allreduce,100\n", "cells the grid does not have"),
    ],
)
def test_a_bad_reading_is_one_line_naming_the_file(
    check: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str], measured: str, says: str
) -> None:
    grid = _write(tmp_path, "grid.csv", GRID)
    path = _write(tmp_path, "measured.csv", measured)
    assert check.main([str(path), "--grid", str(grid)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fig6_check: error: ") and str(path) in err and says in err and "\n" not in err
