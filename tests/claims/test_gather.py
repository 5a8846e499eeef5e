"""Per seed the newest finished run: the one-pass pick gives the frame and statuses the pandas group per seed gave."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from distrepro.claims import gather
from distrepro.claims.gather import latest_per_seed

pytestmark = pytest.mark.smoke


def _by_group(rows: pd.DataFrame) -> tuple[pd.DataFrame, dict[int, str]]:
    """The rule as it was written before the one-pass pick (the reference)."""
    order = rows.sort_values("start_time", kind="stable") if "start_time" in rows else rows
    return gather._latest_by_group(order, rows)


def _table(seeds: list, statuses: list, times: list | None = None) -> pd.DataFrame:
    n = len(seeds)
    data = {
        "run_id": [f"r{i}" for i in range(n)],
        "seed": seeds,
        "status": pd.array(statuses, dtype="string"),
        "final/emulated_s": np.linspace(0.1, 1.7, n) / 3.0,  # values with all their bits
        "method": ["m"] * n,
    }
    if times is not None:
        data["start_time"] = pd.to_datetime(times, unit="s", utc=True)
    return pd.DataFrame(data, index=[100 + 3 * i for i in range(n)])


CASES: dict[str, Any] = {
    "reruns, the newest finished counts": (
        [3, 1, 3, 1, 2],
        ["FINISHED", "FINISHED", "FINISHED", "FAILED", "FINISHED"],
        [5, 1, 2, 9, 3],
    ),
    "a seed with no finished run": ([0, 0, 1], ["FAILED", "KILLED", "FINISHED"], [1, 2, 3]),
    "no start time: table order": ([2, 2, 1], ["FINISHED", "FINISHED", "RUNNING"], None),
    "a missing status": ([0, 1, 1], ["FINISHED", None, "FINISHED"], [3, 2, 1]),
    "float seeds with a NaN": ([1.0, np.nan, 0.0, 1.0], ["FINISHED"] * 4, [1, 2, 3, 4]),
    "equal start times keep table order": ([5, 5, 5], ["FINISHED", "FINISHED", "FAILED"], [7, 7, 7]),
    "nothing finished": ([0, 1], ["FAILED", "FAILED"], [1, 2]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_one_pass_pick_is_the_group_per_seed(case: str) -> None:
    rows = _table(*CASES[case])
    got, got_bad = latest_per_seed(rows)
    want, want_bad = _by_group(rows)
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert got_bad == want_bad and list(got_bad) == list(want_bad)
    assert list(got.index) == list(want.index)


def test_the_newest_finished_run_of_each_seed_is_picked() -> None:
    rows = _table(*CASES["reruns, the newest finished counts"])
    done, bad = latest_per_seed(rows)
    assert list(done.index) == [1, 2, 3] and list(done["run_id"]) == ["r1", "r4", "r0"] and bad == {}


def test_a_one_ulp_difference_in_a_picked_row_would_show() -> None:
    rows = _table(*CASES["reruns, the newest finished counts"])
    got, _ = latest_per_seed(rows)
    nudged = rows.copy()
    nudged.loc[100, "final/emulated_s"] = np.nextafter(nudged.loc[100, "final/emulated_s"], np.inf)
    with pytest.raises(AssertionError):
        pd.testing.assert_frame_equal(got, _by_group(nudged)[0], check_exact=True)


def test_a_seed_column_of_another_kind_is_grouped_by_pandas(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _table(["1", "2", "1"], ["FINISHED", "FAILED", "FINISHED"], [1, 2, 3])
    calls: list[int] = []
    by_group = gather._latest_by_group

    def spy(order: pd.DataFrame, frame: pd.DataFrame) -> tuple[pd.DataFrame, dict[int, str]]:
        calls.append(len(order))
        return by_group(order, frame)

    monkeypatch.setattr(gather, "_latest_by_group", spy)
    done, bad = latest_per_seed(rows)
    assert calls == [3] and list(done["run_id"]) == ["r2"] and bad == {2: "FAILED"}


class _Spec:
    """What select_arm reads of a paper: its arms."""

    def __init__(self, **arms: SimpleNamespace) -> None:
        self.arms = arms

    def arm(self, name: str) -> SimpleNamespace:
        return self.arms[name]


SPEC: Any = _Spec(
    fast=SimpleNamespace(method="m", campaign=None, params={"lr": 0.1}),
    camp=SimpleNamespace(method="m", campaign="c1", params={}),
)


def _runs() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "run_id": ["a", "b", "c", "d"],
            "method": pd.array(["m", "m", "x", "m"], dtype="string"),
            "profile": ["p", "q", "p", "p"],
            "campaign": ["c1", None, "c1", "c2"],
            "params.method_params.lr": [0.1, 0.1, 0.1, np.nan],
            "final/emulated_s": [1.0, 2.0, 3.0, 4.0],
        }
    )


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each fresh match of select_arm (the memo emptied first)."""
    calls: list[int] = []
    fresh = gather._arm_mask

    def spy(*args: object) -> object:
        calls.append(1)
        return fresh(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(gather, "_MASKS", {})
    monkeypatch.setattr(gather, "_arm_mask", spy)
    return calls


def test_a_table_differing_in_its_time_columns_only_reuses_the_rows(counted: list[int]) -> None:
    runs = _runs()
    first = gather.select_arm(runs, SPEC, "fast", "p", None)
    retimed = runs.copy()
    retimed["final/emulated_s"] = [9.0, 8.0, 7.0, 6.0]
    again = gather.select_arm(retimed, SPEC, "fast", "p", None)
    assert counted == [1]
    assert list(first["run_id"]) == ["a"] and list(again["final/emulated_s"]) == [9.0]
    gather.select_arm(runs, SPEC, "camp", None, None)  # another arm: its own rows
    assert counted == [1, 1]


@pytest.mark.parametrize(
    ("column", "row", "value", "want"),
    [
        ("method", 1, "x", ["a"]),
        ("profile", 1, "p", ["a", "b"]),
        ("params.method_params.lr", 0, np.nextafter(0.1, 1.0), ["a"]),  # one ulp off: still the arm's value
        ("params.method_params.lr", 0, 0.2, []),
        ("campaign", 1, "c1", ["a", "b"]),
    ],
)
def test_a_changed_cell_that_selects_is_matched_afresh(
    counted: list[int], column: str, row: int, value: object, want: list[str]
) -> None:
    runs = _runs()
    arm = "camp" if column == "campaign" else "fast"
    profile = None if column in ("profile", "campaign") else "p"
    gather.select_arm(runs, SPEC, arm, profile, None)
    changed = runs.copy()
    changed.loc[row, column] = value
    got = gather.select_arm(changed, SPEC, arm, profile, None)
    assert counted == [1, 1]  # not the first table's rows
    assert list(got["run_id"]) == want


def test_the_memo_gives_the_rows_a_fresh_match_gives(counted: list[int]) -> None:
    runs = _runs()
    for arm, profile, scale in [
        ("fast", None, None),
        ("fast", "p", None),
        ("camp", None, "proxy"),
        ("camp", "q", None),
    ]:
        fresh = gather.select_arm(runs, SPEC, arm, profile, scale)
        memo = gather.select_arm(runs.copy(), SPEC, arm, profile, scale)
        pd.testing.assert_frame_equal(fresh, memo, check_exact=True)
    assert len(counted) == 4


# ---------------------------------------------------------------- latest_per_seed's memo


@pytest.fixture
def fresh_memo(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each computed (not memoised) answer of latest_per_seed, the memo emptied first."""
    calls: list[int] = []
    pick = gather._pick_latest

    def spy(rows: pd.DataFrame) -> tuple[pd.DataFrame, dict[int, str]]:
        calls.append(len(rows))
        return pick(rows)

    monkeypatch.setattr(gather, "_LATEST", {})
    monkeypatch.setattr(gather, "_pick_latest", spy)
    return calls


@pytest.mark.parametrize("case", list(CASES))
def test_a_memoised_answer_is_the_computed_one(case: str, fresh_memo: list[int]) -> None:
    rows = _table(*CASES[case])
    first, first_bad = latest_per_seed(rows)
    again, again_bad = latest_per_seed(rows.copy())
    want, want_bad = _by_group(rows)
    assert fresh_memo == [len(rows)]  # the equal copy was answered from the memo
    for got, bad in ((first, first_bad), (again, again_bad)):
        pd.testing.assert_frame_equal(got, want, check_exact=True, check_index_type=True, check_column_type=True)
        assert list(got.dtypes) == list(want.dtypes) and bad == want_bad


def test_a_table_differing_in_one_cell_is_computed_afresh(fresh_memo: list[int]) -> None:
    rows = _table(*CASES["reruns, the newest finished counts"])
    first, _ = latest_per_seed(rows)
    retimed = rows.copy()
    retimed.loc[100, "final/emulated_s"] = np.nextafter(retimed.loc[100, "final/emulated_s"], np.inf)
    second, _ = latest_per_seed(retimed)
    assert len(fresh_memo) == 2
    assert second.loc[3, "final/emulated_s"] == retimed.loc[100, "final/emulated_s"] != first.loc[3, "final/emulated_s"]


def test_a_caller_changing_its_answer_changes_no_other(fresh_memo: list[int]) -> None:
    rows = _table(*CASES["reruns, the newest finished counts"])
    mine, bad = latest_per_seed(rows)
    mine.loc[3, "final/emulated_s"] = -1.0
    mine.index.name = "changed"
    bad[99] = "MINE"
    theirs, their_bad = latest_per_seed(rows)
    assert fresh_memo == [len(rows)]
    assert theirs.loc[3, "final/emulated_s"] == rows.loc[100, "final/emulated_s"]
    assert theirs.index.name == "seed" and 99 not in their_bad


def test_a_table_without_a_key_is_computed_every_time(fresh_memo: list[int]) -> None:
    rows = _table(*CASES["reruns, the newest finished counts"])
    rows["run_id"] = [[i] for i in range(len(rows))]  # a list cell: not keyed exactly
    latest_per_seed(rows)
    latest_per_seed(rows)
    assert fresh_memo == [len(rows), len(rows)] and gather._LATEST == {}


# ---------------------------------------------------------------- seed_values read by columns


def _old_seed_values(rows: pd.DataFrame, col: str | None) -> tuple[dict[int, float], dict[int, float], list[int]]:
    """seed_values' summary branch as written before the column reads (``iterrows``; the reference)."""
    values: dict[int, float] = {}
    censored: dict[int, float] = {}
    missing: list[int] = []
    for seed, row in rows.iterrows():
        cell = row.get(col) if col else None
        reached = row.get("target_reached")
        if col in gather._TARGET_SUMMARIES and reached is not None and not pd.isna(reached) and float(reached) == 0:
            censored[int(seed)] = float("inf")
        elif cell is None or pd.isna(cell):
            missing.append(int(seed))
        else:
            values[int(seed)] = float(cell)
    return values, censored, missing


def _summaries(kind: str) -> pd.DataFrame:
    seeds = [4, 1, 7, 2]
    frame = pd.DataFrame(
        {
            "seed": seeds,
            "run_id": ["a", "b", "c", "d"],
            "final/emulated_s": [0.1 / 3, np.nan, -0.0, 7.25],
            "time_to_target_s": [1.5, 2.0, np.nan, 3.0],
            "target_reached": [1.0, 0.0, np.nan, 1.0],
            "steps": [2**60 + 1, 3, 5, 9],
            "note": ["1.5", None, "x", np.nan],
        },
        index=pd.Index(seeds, name="seed"),
    )
    if kind == "all numeric":
        return frame.drop(columns=["run_id", "note"])
    if kind == "float seeds":
        return frame.set_index(frame["seed"].astype(float))
    if kind == "no target column":
        return frame.drop(columns=["target_reached"])
    if kind == "repeated labels":
        return pd.concat([frame, frame[["final/emulated_s"]] * 2], axis=1)
    return frame


@pytest.mark.parametrize("kind", ["mixed", "all numeric", "float seeds", "no target column", "repeated labels"])
@pytest.mark.parametrize("metric", ["final/emulated_s", "time_to_target_s", "steps", "absent", None])
def test_summary_values_are_the_row_by_row_ones(kind: str, metric: str | None) -> None:
    rows = _summaries(kind)
    claim = SimpleNamespace(target=None)
    if kind == "repeated labels" and metric == "final/emulated_s":  # ambiguous either way: row.get gives a Series
        with pytest.raises(ValueError, match="ambiguous"):
            _old_seed_values(rows, metric)
        with pytest.raises(ValueError, match="ambiguous"):
            gather.seed_values(claim, rows, None, metric)
        return
    got = gather.seed_values(claim, rows, None, metric)
    col = gather.metric_column(rows, metric) if metric else None
    want = _old_seed_values(rows, col)
    assert got == want and [list(map(type, d)) for d in got[:2]] == [list(map(type, d)) for d in want[:2]]
    for new, old in zip(got[0].values(), want[0].values(), strict=True):
        assert np.float64(new).tobytes() == np.float64(old).tobytes()  # -0.0 stays -0.0
    assert sum(map(len, got)) == len(rows)
