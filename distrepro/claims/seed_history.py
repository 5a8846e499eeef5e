"""Which runs already used the seeds a pre-registration names, and when: the check that a record precedes its runs.

A record certifies that its seeds' verdicts were not seen when it was written. That holds only if no run at its
scale used one of those seeds before the record's date, whichever run the report later keeps (a rerun replaces an
earlier run of the same seed in the report, but the earlier one was seen). Both places that compare a record with
runs read them here: ``distrepro preregister`` refuses seeds the store's runs already used
(:func:`store_uses`, unless ``--post-hoc``), and the report marks every verdict of a record dated after the first
run on its seeds post hoc (:func:`first_uses` on every run it read, superseded and failed ones included;
:func:`distrepro.claims.certification.standing`).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from distrepro.claims.record_check import DATE_FORMAT


@dataclass(frozen=True)
class SeedUse:
    """The first run on one registered seed: its id and its start (None where the run records none)."""

    seed: int
    run_id: str
    started: _dt.datetime | None

    def text(self) -> str:
        when = self.started.strftime(DATE_FORMAT) if self.started is not None else "at a time the store lacks"
        return f"seed {self.seed}: run {self.run_id[:12]} started {when}"

    def entry(self) -> dict[str, Any]:
        """As a record's ``post_hoc_seeds:`` keeps it."""
        started = self.started.strftime(DATE_FORMAT) if self.started is not None else "unknown"
        return {"seed": self.seed, "run": self.run_id, "started": started}


def first_uses(runs: pd.DataFrame, seeds: Iterable[int]) -> list[SeedUse]:
    """Per seed of ``seeds``, the earliest of ``runs`` (rows of one scale with ``run_id``, ``seed``, ``start_time``)
    on it, in order of start, runs without a start last (a run whose start is unknown cannot be dated after a
    record)."""
    wanted = {int(s) for s in seeds}
    if runs.empty or "seed" not in runs.columns:
        return []
    seed = pd.to_numeric(runs["seed"], errors="coerce")
    rows = runs.loc[seed.isin(wanted)]
    if rows.empty:
        return []
    starts = pd.to_datetime(rows.get("start_time", pd.Series(pd.NaT, index=rows.index)), utc=True, errors="coerce")
    ordered = rows.assign(_start=starts, _seed=seed[rows.index].astype(int)).sort_values(
        "_start", na_position="last", kind="stable"
    )
    out = []
    for _, row in ordered.drop_duplicates("_seed").iterrows():
        start = row["_start"]
        started = None if pd.isna(start) else start.to_pydatetime()
        out.append(SeedUse(int(row["_seed"]), str(row.get("run_id", "?")), started))
    return out


def _rows(client: Any, experiment_id: str, scale: str, default_scale: str) -> pd.DataFrame:
    """Every cell run of the experiment at ``scale`` (a run without a scale tag counts at ``default_scale``, as
    the report counts it): run id, seed and start."""
    rows, token = [], None
    while True:
        page = client.search_runs([experiment_id], max_results=1000, page_token=token)
        for run in page:
            tags = run.data.tags
            seed = tags.get("distrepro.seed", "")
            if "distrepro.method" not in tags or not seed.isdecimal():
                continue
            if (tags.get("distrepro.scale") or default_scale) != scale:
                continue
            start = pd.to_datetime(run.info.start_time, unit="ms", utc=True) if run.info.start_time else pd.NaT
            rows.append({"run_id": run.info.run_id, "seed": int(seed), "start_time": start})
        token = page.token
        if not token:
            return pd.DataFrame(rows, columns=["run_id", "seed", "start_time"])


def store_uses(
    paper: str, scale: str, default_scale: str, seeds: Iterable[int], tracking_uri: str | None = None
) -> tuple[list[SeedUse], str]:
    """The first run on each of ``seeds`` among ``paper``'s runs at ``scale`` in the MLflow store (any status: a
    failed or superseded run was seen too), and the store's URI. A SQLite store that does not exist holds no run
    and is not created; a store that cannot be read is :class:`~distrepro.errors.StoreUnavailable`."""
    from distrepro.tracking.mlflow_client import experiment_name, make_client, resolve_tracking_uri
    from distrepro.tracking.storeprobe import sqlite_path

    uri = tracking_uri or resolve_tracking_uri()
    path = sqlite_path(uri)
    if path is not None and not path.is_file():
        return [], uri
    client = make_client(uri)
    experiment = client.get_experiment_by_name(experiment_name(paper))
    if experiment is None:
        return [], uri
    return first_uses(_rows(client, experiment.experiment_id, scale, default_scale), seeds), uri
