"""Metric histories of many runs read in a few store queries instead of one ``get_metric_history`` per run and key.

Why: a report reads the curves of every run (:func:`distrepro.claims.runs.load_runs`). Through ``MlflowClient`` that
is one call per (run, metric key), each opening a session, querying, and building ``Metric`` entities: for a paper
of 150 runs with a dozen curve keys, thousands of queries and about a quarter of the report's CPU. MLflow 3's
``MlflowClient`` has no public batch read (its ``get-history-bulk-interval`` REST call samples points, which a verdict
cannot use; ``SqlAlchemyStore.get_metric_history_bulk`` takes one key at a time and caps the rows), so for a SQL store
this module asks MLflow's own ``SqlAlchemyStore`` session for the rows of all the runs and keys at once.

The rows are the ones ``get_metric_history`` returns, in its order (``timestamp, step, value``, per run and key), with
its value rule: a NaN is stored as ``is_nan`` with value 0 and read back as NaN, ±inf is stored (and read back) as
±``float`` max either way. Any other store (a file store, a tracking server), a store subclass whose access rules this
does not know (workspaces), or any error here returns None: the caller then reads run by run as before, through the
guarded client, which reports a store fault its usual way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: (step, value, timestamp) of one logged point, as ``get_metric_history`` gives them
Point = tuple[int, float, int]

#: bound parameters per query: under SQLite's historical 999 limit, whichever SQLite the user's Python has
_MAX_PARAMS = 900


def _sql_store(client: Any) -> Any | None:
    """The client's ``SqlAlchemyStore``, or None for any other store (or a subclass, e.g. one with workspaces)."""
    try:
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

        store = client._tracking_client.store  # a GuardedClient forwards private names unguarded
    except Exception:  # another client, another mlflow: the per-run path
        return None
    return store if type(store) is SqlAlchemyStore else None


def _chunks(items: Sequence[str], size: int) -> list[Sequence[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)] or [[]]


def _query(store: Any, run_ids: Sequence[str], keys: Sequence[str]) -> dict[tuple[str, str], list[Point]]:
    from mlflow.store.tracking.dbmodels.models import SqlMetric

    found: dict[tuple[str, str], list[Point]] = {}
    key_size = max(1, min(len(keys), _MAX_PARAMS // 2))
    run_size = max(1, _MAX_PARAMS - key_size)
    cols = (SqlMetric.run_uuid, SqlMetric.key, SqlMetric.step, SqlMetric.value, SqlMetric.timestamp, SqlMetric.is_nan)
    with store.ManagedSessionMaker() as session:
        for runs in _chunks(run_ids, run_size):
            for some in _chunks(keys, key_size):
                rows = (
                    session.query(*cols)
                    .filter(SqlMetric.run_uuid.in_(list(runs)), SqlMetric.key.in_(list(some)))
                    .order_by(SqlMetric.timestamp, SqlMetric.step, SqlMetric.value)  # get_metric_history's order
                    .all()
                )
                for run_id, key, step, value, timestamp, is_nan in rows:
                    point = (int(step), float("nan") if is_nan else float(value), int(timestamp))
                    found.setdefault((run_id, key), []).append(point)
    return found


def bulk_histories(client: Any, keys_of: Mapping[str, Sequence[str]]) -> dict[tuple[str, str], list[Point]] | None:
    """(run id, key) -> its logged points in ``get_metric_history``'s order, for every key of every run in
    ``keys_of`` (a pair with no points is absent); None where only the per-run read can answer (see the module)."""
    store = _sql_store(client)
    if store is None:
        return None
    run_ids = [r for r, keys in keys_of.items() if keys]
    keys = sorted({k for r in run_ids for k in keys_of[r]})
    if not run_ids:
        return {}
    try:
        return _query(store, run_ids, keys)
    except Exception:  # a locked or broken database, another schema: the guarded per-run read says what is wrong
        return None
