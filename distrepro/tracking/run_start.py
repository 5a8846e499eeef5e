"""A run's start time moved to when its work began, where the store allows it.

Why: MLflow's runs table shows each run's Duration as end time minus start time, and the start time is when the
run was created. A campaign that hands its cells to an executor creates every child run (SCHEDULED) and, under
``reproduce``, every arm's run before the first cell trains, so a cell that waited in the queue, and every arm,
would show the whole reproduction's wall time. A cell's run therefore starts when a worker takes it, and an
arm's run when its first cell started (its end already follows its last cell's).

MLflow 3 sets a run's start time only when the run is created (``MlflowClient.create_run(start_time=...)``);
``update_run`` and the REST API's ``UpdateRun`` take a status, an end time and a name, not a start time. A
SQL store (SQLite, PostgreSQL, MySQL: MLflow's ``SqlAlchemyStore``) is written here, through the store's own
session, in one short transaction; any other store (a tracking server over HTTP) keeps the creation time, and
:func:`set_start_time` says so by returning False.
"""

from __future__ import annotations

import time
from typing import Any


def now_ms() -> int:
    """The time in MLflow's unit (milliseconds since the epoch), as MLflow stamps its own."""
    return int(time.time() * 1000)


def _sql_store(client: Any) -> Any | None:
    """The client's store when it is MLflow's SQL store, else None (also reached through a ``GuardedClient``)."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    store = getattr(getattr(client, "_tracking_client", None), "store", None)
    return store if isinstance(store, SqlAlchemyStore) else None


def set_start_time(client: Any, run_id: str, start_ms: int) -> bool:
    """Set run ``run_id``'s start time to ``start_ms``; False (nothing written) where the store cannot."""
    store = _sql_store(client)
    if store is None:
        return False
    guard = getattr(client, "_guard", None)  # a store fault is distrepro's one line, as for every other call

    def write() -> None:
        with store.ManagedSessionMaker(read_only=False) as session:
            run = store._get_run(run_uuid=run_id, session=session)
            run.start_time = start_ms
            session.add(run)

    (guard("set_start_time", write) if guard is not None else write)()
    return True


def first_start(runs: list[Any]) -> int | None:
    """The earliest start time (ms) of ``runs`` (MLflow ``Run`` objects), or None when there are none."""
    starts = [run.info.start_time for run in runs if run.info.start_time is not None]
    return min(starts) if starts else None
