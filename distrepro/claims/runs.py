"""Runs read back from MLflow into tidy tables: the only input of verdicts and reports.

Everything a verdict or a figure uses comes from the tracking store (``search_runs`` and metric
histories through an ``MlflowClient``; artifacts only for the timeline and the method README
that a run logged), never from files a trainer wrote on disk, so a report can be rebuilt anywhere
the store is reachable and always describes exactly what was tracked.

Tables (column names follow :mod:`distrepro.tracking.run_observer`'s metric-name contract):

* ``runs`` — one row per cell run (a child run tagged ``distrepro.method``): identity columns
  (``run_id, parent_run_id, campaign, paper, method, profile, profile_variant, seed, status,
  start_time, end_time, engine, world_size, dataset, model, emulated_workload, budget, scale``),
  every metric's latest value under its own name (``final/val_accuracy``, ``time_to_target_s``,
  ``worker/0/comm_s``, ``alloc/0/share`` …), ``params.<key>`` / ``tags.<key>``, and the summaries no
  writer logs (:data:`distrepro.metrics.DERIVED`: the share of time not computing, the decay rate and
  area of the consensus-distance curve, :mod:`distrepro.claims.curve_summary`);
* ``curves`` — one row per (run, evaluation): ``run_id, step`` plus ``val_accuracy``, ``epoch``,
  ``samples``, ``time/emulated_s`` …;
* ``alloc`` — one row per (run, epoch, rank): ``share``, ``batch_size``, ``speed``.
"""

from __future__ import annotations

import contextlib
import gc
import re
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from io import StringIO
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from distrepro import metrics as M
from distrepro.claims.curve_summary import derive_curve_columns
from distrepro.errors import DistreproError
from distrepro.tracking.campaign_lock import is_lock_param
from distrepro.tracking.history_read import bulk_histories
from distrepro.tracking.mlflow_client import experiment_name, make_client, resolve_tracking_uri

IDENTITY_TAGS = {
    "paper": "distrepro.paper",
    "campaign": "distrepro.campaign",
    "method": "distrepro.method",
    "profile": "distrepro.profile",
    "profile_variant": "distrepro.profile_variant",
    "engine": "distrepro.engine",
    "world_size": "distrepro.world_size",
    "dataset": "distrepro.dataset",
    "model": "distrepro.model",
    "emulated_workload": "distrepro.emulated_workload",
    "budget": "distrepro.budget",
    "scale": "distrepro.scale",  # not logged yet: runs without it are taken at the claim's scale
}
#: metric-name prefixes and summary keys that are not per-evaluation curves
_NOT_CURVES = M.NOT_CURVES
_SUMMARIES = set(M.SUMMARIES)
_ALLOC = re.compile(r"^alloc/(\d+)/(share|batch_size|speed)$")


class ReportError(DistreproError):
    """The runs asked for cannot be found (no experiment, unknown campaign, no runs)."""


class NoExperimentError(ReportError):
    """No MLflow experiment ``distrepro/<paper>``: with a paper the repo does not know either, a typo."""


@dataclass
class RunSet:
    """The runs of one experiment (optionally of some campaigns), with lazy artifact access."""

    experiment: str
    tracking_uri: str
    runs: pd.DataFrame
    curves: pd.DataFrame
    alloc: pd.DataFrame
    campaigns: list[str] = field(default_factory=list)
    client: Any = None
    artifacts: dict[tuple[str, str], str | None] = field(default_factory=dict)

    def artifact_text(self, run_id: str, path: str) -> str | None:
        """A run's text artifact (``timeline.csv``, ``method_README.md``), or None if absent."""
        key = (run_id, path)
        if key not in self.artifacts:
            self.artifacts[key] = None
            if self.client is not None:
                try:
                    with tempfile.TemporaryDirectory() as tmp:
                        local = self.client.download_artifacts(run_id, path, tmp)
                        self.artifacts[key] = Path(local).read_text(encoding="utf-8")
                except Exception:  # missing artifact, unreachable store: the figure is skipped
                    self.artifacts[key] = None
        return self.artifacts[key]

    def timeline(self, run_id: str) -> pd.DataFrame | None:
        text = self.artifact_text(run_id, "timeline.csv")
        if not text:
            return None
        frame = pd.read_csv(StringIO(text))
        return frame if {"rank", "kind", "start_s", "end_s", "step"} <= set(frame.columns) else None


def _run_row(run: Any) -> dict[str, Any]:
    info, data = run.info, run.data
    tags = dict(data.tags)
    row: dict[str, Any] = {
        "run_id": info.run_id,
        "run_name": info.run_name,
        "parent_run_id": tags.get("mlflow.parentRunId"),
        "status": info.status,
        "start_time": pd.to_datetime(info.start_time, unit="ms", utc=True),
        "end_time": pd.to_datetime(info.end_time, unit="ms", utc=True) if info.end_time else pd.NaT,
    }
    for col, tag in IDENTITY_TAGS.items():
        row[col] = tags.get(tag)
    seed = tags.get("distrepro.seed")
    row["seed"] = int(seed) if seed is not None and seed.lstrip("-").isdigit() else -1
    row.update(data.metrics)
    row.update({f"params.{k}": v for k, v in data.params.items() if not is_lock_param(k)})  # a config's fields
    row.update({f"tags.{k}": v for k, v in tags.items()})
    return row


def _search_all(client: Any, experiment_id: str) -> list[Any]:
    runs: list[Any] = []
    token = None
    while True:
        page = client.search_runs([experiment_id], max_results=1000, page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def _descends(run_id: str, parent_of: dict[str, str | None], roots: set[str]) -> bool:
    seen: set[str] = set()
    cur: str | None = run_id
    while cur is not None and cur not in seen:
        if cur in roots:
            return True
        seen.add(cur)
        cur = parent_of.get(cur)
    return False


class Counted(Protocol):
    """Who is told how far reading has got (the report's step lines): a phase of ``total`` units, then units done."""

    def phase(self, name: str, total: int) -> None: ...

    def advance(self, n: int = 1) -> None: ...


def _histories(
    client: Any, run_ids: Iterable[str], keys_of: dict[str, list[str]], progress: Counted | None = None
) -> pd.DataFrame:
    """The points of each run's keys, run by run and key by key in the order given. A SQL store answers in a few
    queries (:mod:`distrepro.tracking.history_read`); any other store, one ``get_metric_history`` per run and key."""
    run_ids = list(run_ids)
    bulk = bulk_histories(client, {r: keys_of[r] for r in run_ids})
    records: list[tuple[str, str, int, float, int]] = []
    for run_id in run_ids:
        for key in keys_of[run_id]:
            if bulk is not None:
                records.extend((run_id, key, *point) for point in bulk.get((run_id, key), ()))
            else:
                for m in client.get_metric_history(run_id, key):
                    records.append((run_id, key, int(m.step), float(m.value), int(m.timestamp)))
        if progress is not None:
            progress.advance()
    return pd.DataFrame(records, columns=["run_id", "key", "step", "value", "timestamp"])


def curve_keys(metric_keys: Iterable[str], extra: Sequence[str] = ()) -> list[str]:
    """The per-evaluation metrics of a run: everything but summaries and per-worker/alloc/emu series."""
    keys = {k for k in metric_keys if not k.startswith(_NOT_CURVES) and k not in _SUMMARIES}
    return sorted(keys | (set(M.CURVE_CLOCKS) & set(metric_keys)) | set(extra))


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector held off while runs are read. Reading builds some 10^5 short-lived objects
    (``search_runs``' ORM rows: every run's latest metrics, params and tags), and each collection they set off scans
    every live object of the process: for acid's 238 runs, 3.0 → 2.5 s of CPU in a report's process, 3.4 → 1.5 s
    in one that has loaded torch and matplotlib too. No value changes; what cycles the read leaves are collected
    after it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@_collector_paused()
def load_runs(
    paper: str | None,
    campaigns: Sequence[str] | None = None,
    tracking_uri: str | None = None,
    extra_curve_keys: Sequence[str] = (),
    progress: Counted | None = None,
) -> RunSet:
    """Read the cell runs of experiment ``distrepro/<paper>`` (of ``campaigns`` only, if given); ``progress`` is
    told of the runs whose curves are read, one at a time (a SQL store reads them all in a few queries; any
    other store, one query per run and metric: the slow part)."""
    uri = tracking_uri or resolve_tracking_uri()
    client = make_client(uri)
    name = experiment_name(paper)
    exp = client.get_experiment_by_name(name)
    for cid in campaigns or []:
        try:
            run = client.get_run(cid)
        except Exception as exc:
            raise ReportError(f"campaign run {cid!r} not found in {uri}") from exc
        if exp is None or run.info.experiment_id != exp.experiment_id:
            other = client.get_experiment(run.info.experiment_id).name
            raise ReportError(f"campaign run {cid} belongs to experiment {other!r}, not {name!r}")
    if exp is None:
        raise NoExperimentError(f"no MLflow experiment {name!r} in {uri}; run a campaign with paper: {paper} first")
    all_runs = _search_all(client, exp.experiment_id)
    parent_of = {r.info.run_id: r.data.tags.get("mlflow.parentRunId") for r in all_runs}
    leaves = [r for r in all_runs if "distrepro.method" in r.data.tags]
    if campaigns:
        roots = set(campaigns)
        leaves = [r for r in leaves if _descends(r.info.run_id, parent_of, roots)]
    if not leaves:
        scope = f" under campaign(s) {', '.join(campaigns)}" if campaigns else ""
        raise ReportError(f"no runs in experiment {name!r}{scope} ({uri})")
    runs = pd.DataFrame([_run_row(r) for r in leaves])
    runs = derive_columns(runs.sort_values(["method", "profile", "seed", "start_time"], kind="stable"))
    runs = runs.reset_index(drop=True)
    keys_of = {r.info.run_id: curve_keys(r.data.metrics, extra_curve_keys) for r in leaves}
    if progress is not None:
        progress.phase(f"the curves of {len(leaves)} runs", len(leaves))
    long = _histories(client, runs["run_id"], keys_of, progress)
    curves = (
        long.sort_values("timestamp", kind="stable")
        .drop_duplicates(["run_id", "key", "step"], keep="last")
        .pivot(index=["run_id", "step"], columns="key", values="value")
        .reset_index()
        .rename_axis(columns=None)
        if not long.empty
        else pd.DataFrame(columns=["run_id", "step"])
    )
    runs = derive_curve_columns(runs, curves)  # decay rate / area of the consensus distance (claims.curve_summary)
    alloc_keys = {r.info.run_id: [k for k in r.data.metrics if _ALLOC.match(k)] for r in leaves}
    alloc = alloc_table(_histories(client, runs["run_id"], alloc_keys))
    used = sorted({p for p in runs["parent_run_id"].dropna()} | set(campaigns or []))
    return RunSet(name, uri, runs, curves, alloc, used, client)


def derive_columns(runs: pd.DataFrame) -> pd.DataFrame:
    """Summaries no writer logs but claims need, from the per-worker totals of each run:
    ``final/non_compute_fraction`` = 1 − Σ compute_s / Σ clock_s over the workers (NaN without them)."""
    compute = [c for c in runs.columns if re.fullmatch(r"worker/\d+/compute_s", c)]
    clocks = [c.replace("/compute_s", "/clock_s") for c in compute]
    if not compute or not set(clocks) <= set(runs.columns):
        return runs
    total = runs[clocks].sum(axis=1, min_count=1)
    share = 1.0 - runs[compute].sum(axis=1, min_count=1) / total.where(total > 0)
    return runs.assign(**{M.FINAL_NON_COMPUTE_FRACTION: share})


def alloc_table(long: pd.DataFrame) -> pd.DataFrame:
    """``alloc/<r>/<field>`` histories (step = epoch) → rows of (run_id, epoch, rank, share, batch_size,
    speed); ``speed`` (samples/s the split was based on) is NaN for methods that do not report it."""
    cols = ["run_id", "epoch", "rank", "share", "batch_size", "speed"]
    if long.empty:
        return pd.DataFrame(columns=cols)
    parts = long["key"].str.extract(_ALLOC)
    long = long.assign(rank=parts[0].astype(int), field=parts[1], epoch=long["step"])
    wide = long.pivot_table(index=["run_id", "epoch", "rank"], columns="field", values="value", aggfunc="last")
    return wide.reset_index().rename_axis(columns=None).reindex(columns=cols)
