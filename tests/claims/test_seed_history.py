"""Which runs used a record's seeds before it, and when (issue 47): the earliest run per seed counts, superseded and
failed ones included, a run without a start is told apart, and a store that does not exist is not created."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd
import pytest

from distrepro.claims.seed_history import SeedUse, first_uses, store_uses


def _at(day: int) -> pd.Timestamp:
    return pd.Timestamp(f"2026-01-{day:02d}", tz="UTC")


@pytest.mark.smoke
def test_the_first_run_per_seed_counts_whatever_replaced_it() -> None:
    runs = pd.DataFrame(
        [
            {"run_id": "rerun-0", "seed": 0, "start_time": _at(20), "status": "FINISHED"},
            {"run_id": "early-0", "seed": 0, "start_time": _at(3), "status": "FAILED"},  # superseded, still seen
            {"run_id": "undated-1", "seed": 1, "start_time": pd.NaT, "status": "FINISHED"},
            {"run_id": "other-7", "seed": 7, "start_time": _at(1), "status": "FINISHED"},  # not a registered seed
        ]
    )
    uses = first_uses(runs, [0, 1, 2])
    assert uses == [SeedUse(0, "early-0", dt.datetime(2026, 1, 3, tzinfo=dt.UTC)), SeedUse(1, "undated-1", None)]
    assert uses[0].text() == "seed 0: run early-0 started 2026-01-03T00:00:00Z"
    assert uses[1].entry() == {"seed": 1, "run": "undated-1", "started": "unknown"}
    assert first_uses(runs, [2]) == [] and first_uses(pd.DataFrame(), [0]) == []


def test_a_store_that_does_not_exist_holds_no_run_and_is_not_made(tmp_path: Path) -> None:
    db = tmp_path / "none.db"
    assert store_uses("tinypaper", "proxy", "proxy", [0, 1], f"sqlite:///{db}") == ([], f"sqlite:///{db}")
    assert not db.exists()
