"""A run's start time moved to when its work began: written on a SQL store, refused (False) on any other."""

from __future__ import annotations

from typing import Any

import pytest

from distrepro.errors import StoreUnavailable
from distrepro.tracking.mlflow_client import ensure_experiment, make_client
from distrepro.tracking.run_start import first_start, now_ms, set_start_time


def test_a_sql_store_takes_a_later_start_and_keeps_the_rest(mlflow_uri: str) -> None:
    client = make_client(mlflow_uri)
    run = client.create_run(ensure_experiment(client, "starts"), start_time=1_000, run_name="cell")
    later = now_ms()
    assert set_start_time(client, run.info.run_id, later)
    again = client.get_run(run.info.run_id)
    assert again.info.start_time == later
    assert again.info.status == "RUNNING" and again.info.run_name == "cell"


def test_a_store_other_than_sql_is_left_alone() -> None:
    class Rest:  # what a client of a tracking server holds: not MLflow's SQL store
        _tracking_client = type("T", (), {"store": object()})()

    assert set_start_time(Rest(), "0" * 32, 5) is False


def test_a_store_fault_is_distrepros_one_line(mlflow_uri: str, tmp_path: Any) -> None:
    client = make_client(mlflow_uri)
    run = client.create_run(ensure_experiment(client, "gone"))
    (tmp_path / "mlflow.db").unlink()
    (tmp_path / "mlflow.db").mkdir()  # the file is now a folder: SQLite cannot open it
    client._tracking_client.store.engine.dispose()  # the open connections go with the file
    with pytest.raises(StoreUnavailable):
        set_start_time(client, run.info.run_id, now_ms())


def test_first_start_is_the_earliest_of_the_runs() -> None:
    def run(start: int | None) -> Any:
        return type("R", (), {"info": type("I", (), {"start_time": start})()})()

    assert first_start([run(30), run(10), run(None), run(20)]) == 10
    assert first_start([]) is None
