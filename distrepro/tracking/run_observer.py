"""The MLflow side of a training run: every evaluation and allocation an engine reports, logged as metrics.

Metric names are the contract with the claims/report engine (``distrepro/claims``), which reads runs
back from MLflow only; they are defined in :mod:`distrepro.metrics`:

* per evaluation, at ``step`` = global step: ``val_loss``, ``val_accuracy``, ``train_loss``,
  ``epoch``, ``samples``, ``time/emulated_s``, ``time/wall_s``, ``comm/bytes_total``, ``method/<name>`` (mean
  over ranks; see :meth:`distrepro.api.method.WorkerContext.record`);
* at the final evaluation only (every reader takes the last value; ``evals.csv`` keeps every evaluation's): the
  per-rank values ``worker/<r>/{clock_s,compute_s,comm_s,idle_s,bytes_sent}`` and ``method/<name>/rank<r>``;
* the same quality metrics against emulated time: ``emu_ms/<name>`` at ``step`` = emulated ms;
* the data allocation at ``step`` = epoch index: ``alloc/<r>/share``, ``alloc/<r>/batch_size``, and
  ``alloc/<r>/speed`` (samples/s the split was based on) when the method reports it;
* summaries (``final/*``, ``time_to_target_s``, ``target_reached``) at step 0, written by
  :mod:`distrepro.orchestration.campaign`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from distrepro import metrics as M
from distrepro.api.method import Allocation
from distrepro.job.observer import eval_metrics
from distrepro.job.results import EvalRecord
from distrepro.tracking.mlflow_client import RunLogger, make_client


class MlflowObserver:
    """Writes one run's progress through a buffered :class:`distrepro.tracking.runlog.RunLogger`."""

    def __init__(self, logger: Any) -> None:
        self.logger = logger

    def on_allocation(self, epoch: int, allocation: Allocation) -> None:
        metrics: dict[str, float] = {}
        for r, (share, b) in enumerate(zip(allocation.shares, allocation.batch_sizes, strict=True)):
            metrics[M.alloc(r, "share")] = share
            metrics[M.alloc(r, "batch_size")] = float(b)
        for r, speed in enumerate(allocation.speeds or ()):
            metrics[M.alloc(r, "speed")] = float(speed)
        self.logger.log_metrics(metrics, step=epoch)

    def on_eval(self, record: EvalRecord) -> None:
        self.logger.log_metrics(eval_metrics(record, per_rank=record.final), step=record.step)
        self.logger.log_emulated(record.metrics, record.emulated_s)

    def on_progress(self, fraction: float, emulated_s: float) -> None:
        pass


class MlflowRunSink:
    """A cell's MLflow run as an engine sees it (:class:`distrepro.job.engine.RunSink`): the campaign's
    :class:`~distrepro.tracking.runlog.RunLogger` for that run, with its observer and a way to reopen it elsewhere."""

    def __init__(self, logger: RunLogger) -> None:
        self.logger = logger

    @property
    def run_id(self) -> str:
        return self.logger.run_id

    def set_tags(self, tags: Mapping[str, str]) -> None:
        self.logger.set_tags(tags)

    def observer(self) -> MlflowObserver:
        return MlflowObserver(self.logger)

    def flush(self) -> None:
        self.logger.flush()

    def reopener(self) -> ReopenMlflowRun:
        return ReopenMlflowRun(getattr(self.logger._client, "tracking_uri", None), self.run_id)


@dataclass(frozen=True)
class ReopenMlflowRun:
    """Opens run ``run_id`` of the store at ``tracking_uri`` again, in whatever process calls it (picklable)."""

    tracking_uri: str | None
    run_id: str

    def __call__(self) -> MlflowRunSink:
        return MlflowRunSink(RunLogger(make_client(self.tracking_uri), self.run_id))
