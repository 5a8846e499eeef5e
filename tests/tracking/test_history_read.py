"""The bulk metric read gives exactly what one ``get_metric_history`` per run and key gives, and steps aside for
stores it does not know."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from distrepro.claims import runs as runs_mod
from distrepro.tracking import history_read
from distrepro.tracking.history_read import bulk_histories
from distrepro.tracking.mlflow_client import experiment_name, make_client

INF = float("inf")
NAN = float("nan")
#: (key, value, timestamp, step): a NaN, ±inf, a step logged twice (later and at the same time), unordered timestamps
POINTS_A = [
    ("val_accuracy", 0.5, 1_000, 0),
    ("val_accuracy", NAN, 2_000, 1),
    ("val_accuracy", 0.7, 3_000, 2),
    ("val_accuracy", 0.75, 2_500, 2),
    ("val_accuracy", 0.25, 3_000, 2),
    ("val_accuracy", INF, 4_000, 3),
    ("loss", -INF, 1_000, 0),
    ("loss", 1e-300, 1_500, 1),
    ("loss", NAN, 1_500, 1),
    ("loss", 0.1 + 0.2, 900, 2),
    ("alloc/0/share", 0.5, 1_000, 0),
    ("alloc/1/share", 0.5, 1_000, 0),
    ("alloc/0/batch_size", 32.0, 1_000, 0),
    ("alloc/1/batch_size", 32.0, 1_000, 0),
    ("final/val_accuracy", 0.7, 5_000, 0),
]
POINTS_B = [("val_accuracy", 0.1 * i, 1_000 + i, i) for i in range(5)] + [("loss", 2.0, 7, 0), ("loss", 2.0, 7, 1)]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Any, list[str]]:
    """A SQLite store with experiment ``distrepro/toy``: runs a and b with metrics, c with none."""
    from mlflow.entities import Metric

    root: Path = tmp_path_factory.mktemp("bulk")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    client = make_client(uri)
    exp = client.create_experiment(experiment_name("toy"), artifact_location=str(root / "art"))
    ids = []
    for seed, points in enumerate([POINTS_A, POINTS_B, []]):
        tags = {"distrepro.method": "m", "distrepro.profile": "p", "distrepro.seed": str(seed)}
        run_id = client.create_run(exp, tags=tags).info.run_id
        if points:
            client.log_batch(run_id, metrics=[Metric(k, v, t, s) for k, v, t, s in points])
        client.set_terminated(run_id)
        ids.append(run_id)
    return uri, client, ids


def _keys(client: Any, ids: list[str]) -> dict[str, list[str]]:
    return {r: [*sorted(client.get_run(r).data.metrics), "never_logged"] for r in ids}


def _per_run(client: Any, keys_of: dict[str, list[str]]) -> dict[tuple[str, str], list[tuple[int, float, int]]]:
    return {
        (r, k): [(m.step, m.value, m.timestamp) for m in h]
        for r, keys in keys_of.items()
        for k in keys
        if (h := client.get_metric_history(r, k))
    }


def _same_bits(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    for col in a.columns:
        if a[col].dtype == np.float64:
            assert (a[col].to_numpy().view(np.int64) == b[col].to_numpy().view(np.int64)).all(), col


def test_bulk_read_is_the_per_run_read_point_for_point(store: tuple[str, Any, list[str]]) -> None:
    _, client, ids = store
    keys_of = _keys(client, ids)
    bulk = bulk_histories(client, keys_of)
    assert bulk is not None
    expected = _per_run(client, keys_of)
    assert set(bulk) == set(expected)
    for pair, points in expected.items():  # repr: exact for floats, and NaN equals NaN
        assert [(s, repr(v), t) for s, v, t in bulk[pair]] == [(s, repr(v), t) for s, v, t in points], pair
    assert ids[2] not in {r for r, _ in bulk}  # the run with no metrics has no points
    assert math.isnan(bulk[(ids[0], "loss")][1][1]) or math.isnan(bulk[(ids[0], "loss")][2][1])
    assert bulk[(ids[0], "val_accuracy")][-1][1] == np.finfo(np.float64).max  # inf as the store keeps it


def test_histories_frame_is_identical_with_and_without_bulk(
    store: tuple[str, Any, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, client, ids = store
    keys_of = _keys(client, ids)
    fast = runs_mod._histories(client, ids, keys_of)
    monkeypatch.setattr(history_read, "_MAX_PARAMS", 3)  # many small queries: chunks must not change anything
    chunked = runs_mod._histories(client, ids, keys_of)
    monkeypatch.setattr(runs_mod, "bulk_histories", lambda *_: None)
    slow = runs_mod._histories(client, ids, keys_of)
    assert len(slow) == len(POINTS_A) + len(POINTS_B)
    _same_bits(fast, slow)
    _same_bits(chunked, slow)


def test_load_runs_tables_are_identical_with_and_without_bulk(
    store: tuple[str, Any, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    uri, _, _ = store
    fast = runs_mod.load_runs("toy", tracking_uri=uri, extra_curve_keys=["never_logged"])
    monkeypatch.setattr(runs_mod, "bulk_histories", lambda *_: None)
    slow = runs_mod.load_runs("toy", tracking_uri=uri, extra_curve_keys=["never_logged"])
    assert not slow.curves.empty and not slow.alloc.empty
    for table in ("runs", "curves", "alloc"):
        _same_bits(getattr(fast, table), getattr(slow, table))


def test_other_stores_and_faults_fall_back_to_the_per_run_read(
    store: tuple[str, Any, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, client, ids = store
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps the file store behind this switch
    file_client = make_client(tmp_path.as_uri())
    assert bulk_histories(file_client, {ids[0]: ["loss"]}) is None  # a file store: not SQL
    assert bulk_histories(object(), {ids[0]: ["loss"]}) is None  # not an MlflowClient at all

    def broken(*_: Any) -> Any:
        raise RuntimeError("database is locked")

    monkeypatch.setattr(history_read, "_query", broken)
    assert bulk_histories(client, {ids[0]: ["loss"]}) is None
    assert bulk_histories(client, {ids[2]: []}) == {}  # nothing to read: no query
