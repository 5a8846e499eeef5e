"""What an engine reports to while a run trains: the :class:`RunObserver` interface, :class:`Fanout` to several
observers, and :func:`eval_metrics`, the flat metric names of one evaluation (the contract with the claims
engine, which reads runs back from MLflow only; names in :mod:`distrepro.metrics`).

This sits below the engines so that they depend on an interface, not on who listens: the MLflow writer
(:class:`distrepro.tracking.run_observer.MlflowObserver`) and the progress display
(:class:`distrepro.orchestration.progress.ProgressObserver`) are chosen by the caller.
"""

from __future__ import annotations

from typing import Any, Protocol

from distrepro import metrics as M
from distrepro.api.method import Allocation
from distrepro.job.results import EvalRecord


class RunObserver(Protocol):
    """Receives progress while a run trains (MLflow logger, progress bar)."""

    def on_allocation(self, epoch: int, allocation: Allocation) -> None: ...

    def on_eval(self, record: EvalRecord) -> None: ...

    def on_progress(self, fraction: float, emulated_s: float) -> None: ...


class Fanout:
    """Forward every event to several observers."""

    def __init__(self, *observers: Any) -> None:
        self.observers = [o for o in observers if o is not None]

    def on_allocation(self, epoch: int, allocation: Allocation) -> None:
        for o in self.observers:
            o.on_allocation(epoch, allocation)

    def on_eval(self, record: EvalRecord) -> None:
        for o in self.observers:
            o.on_eval(record)

    def on_progress(self, fraction: float, emulated_s: float) -> None:
        for o in self.observers:
            o.on_progress(fraction, emulated_s)


def eval_metrics(rec: EvalRecord, per_rank: bool = True) -> dict[str, float]:
    """The flat metric dict of one evaluation (names as in the module docstring); without ``per_rank``, only the
    run's own values: no ``worker/<r>/<field>`` nor ``method/<name>/rank<r>``, which MLflow gets at the final
    evaluation only (:mod:`distrepro.tracking.run_observer`)."""
    out: dict[str, float] = dict(rec.metrics)
    out.update(
        {
            M.EPOCH: rec.epoch,
            M.SAMPLES: float(rec.samples),
            M.EMULATED_S: rec.emulated_s,
            M.WALL_S: rec.wall_s,
            M.BYTES_TOTAL: sum(w.bytes_sent for w in rec.workers),
        }
    )
    if rec.throttled_s is not None:
        out[M.THROTTLED_S] = rec.throttled_s
    if per_rank:
        for w in rec.workers:
            for key in M.WORKER_FIELDS:
                out[M.worker(w.rank, key)] = float(getattr(w, key))
    for key, v in rec.method_records.items():
        if per_rank or not _rank_value(key, rec.method_records):
            out[M.method(key)] = v
    return out


def _rank_value(key: str, records: dict[str, float]) -> bool:
    """Whether ``key`` is one rank's value of a record (``<name>/rank<r>`` beside ``<name>``,
    :func:`distrepro.engine.rank_reports.aggregate_records`), not a name a method chose."""
    name, sep, rank = key.rpartition("/rank")
    return bool(sep) and rank.isdigit() and name in records
