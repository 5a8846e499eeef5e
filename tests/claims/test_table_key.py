"""The memo key of a table: equal only where no function of the table's labels, dtypes and cells could differ."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from distrepro.claims.table_key import table_key

pytestmark = pytest.mark.smoke


def _frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "run_id": ["a", "b", None],
            "status": pd.array(["FINISHED", "FAILED", None], dtype="str"),
            "seed": [3, 1, 2],
            "x": [0.1 / 3, np.nan, 2.0],
            "ok": [True, False, True],
            "start_time": pd.to_datetime([1, 2, 3], unit="s", utc=True),
            "params.p": ["1", 1.0, np.nan],
        },
        index=[10, 13, 16],
    )


def test_an_equal_copy_has_the_same_key_nan_included() -> None:
    key = table_key(_frame())
    assert key is not None and key == table_key(_frame().copy()) and hash(key) == hash(table_key(_frame()))


def _changed(change: str) -> pd.DataFrame:
    frame = _frame()
    if change == "one ulp":
        frame.loc[10, "x"] = np.nextafter(frame.loc[10, "x"], np.inf)
    elif change == "int for str":
        frame["params.p"] = [1, 1.0, np.nan]
    elif change == "bool for int in an object column":
        frame["params.p"] = ["1", True, np.nan]
    elif change == "float32":
        frame["x"] = frame["x"].astype("float32")
    elif change == "python string storage":
        frame["status"] = frame["status"].astype(pd.StringDtype("python", na_value=np.nan))
    elif change == "another zone":
        frame["start_time"] = frame["start_time"].dt.tz_convert("Europe/Berlin")
    elif change == "another unit":
        frame["start_time"] = frame["start_time"].dt.as_unit("ns")
    elif change == "a column renamed":
        frame = frame.rename(columns={"x": "y"})
    elif change == "index values":
        frame.index = [10, 13, 17]
    elif change == "range index":
        frame = frame.reset_index(drop=True)
    elif change == "index name":
        frame.index.name = "i"
    elif change == "rows reordered":
        frame = frame.iloc[[1, 0, 2]]
    return frame


@pytest.mark.parametrize(
    "change",
    [
        "one ulp",
        "int for str",
        "bool for int in an object column",
        "float32",
        "python string storage",
        "another zone",
        "another unit",
        "a column renamed",
        "index values",
        "range index",
        "index name",
        "rows reordered",
    ],
)
def test_any_difference_changes_the_key(change: str) -> None:
    key = table_key(_changed(change))
    assert key is not None and key != table_key(_frame())


def test_zero_and_negative_zero_differ() -> None:
    a, b = _frame(), _frame()
    a.loc[16, "x"], b.loc[16, "x"] = 0.0, -0.0
    assert a.equals(b)  # pandas calls them equal; a function of the values may not (1 / x)
    assert table_key(a) != table_key(b)


@pytest.mark.parametrize("change", ["a list cell", "attrs", "categorical", "duplicate columns kept apart"])
def test_what_is_not_keyed_exactly_gets_no_key(change: str) -> None:
    frame = _frame()
    if change == "a list cell":
        frame["params.p"] = [[1], "a", None]
    elif change == "attrs":
        frame.attrs["source"] = "x"
    elif change == "categorical":
        frame["run_id"] = frame["run_id"].astype("category")
    else:
        frame.columns = ["a"] * frame.shape[1]
        assert table_key(frame) != table_key(_frame())
        return
    assert table_key(frame) is None
