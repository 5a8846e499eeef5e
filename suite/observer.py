"""Observers of a training run: the MLflow logger and the progress display.

Metric names are the contract with the claims/report engine (``suite/claims``), which reads runs
back from MLflow only; they are defined in :mod:`suite.metrics`:

* per evaluation, at ``step`` = global step: ``val_loss``, ``val_accuracy``, ``train_loss``,
  ``epoch``, ``samples``, ``time/emulated_s``, ``time/wall_s``, ``comm/bytes_total``,
  ``worker/<r>/{clock_s,compute_s,comm_s,idle_s,bytes_sent}``, ``method/<name>`` (mean over ranks) and
  ``method/<name>/rank<r>`` (see :meth:`suite.api.WorkerContext.record`);
* the same quality metrics against emulated time: ``emu/<name>`` at ``step`` = emulated ms;
* the data allocation at ``step`` = epoch index: ``alloc/<r>/share``, ``alloc/<r>/batch_size``, and
  ``alloc/<r>/speed`` (samples/s the split was based on) when the method reports it;
* summaries (``final/*``, ``time_to_target_s``, ``target_reached``) at step 0, written by
  :mod:`suite.campaign`.
"""

from __future__ import annotations

import sys
from typing import Any

from suite import metrics as M
from suite.api import Allocation
from suite.engine.results import EvalRecord


def eval_metrics(rec: EvalRecord) -> dict[str, float]:
    """The flat metric dict of one evaluation (names as in the module docstring)."""
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
    for w in rec.workers:
        for key in M.WORKER_FIELDS:
            out[M.worker(w.rank, key)] = float(getattr(w, key))
    for key, v in rec.method_records.items():
        out[M.method(key)] = v
    return out


class MlflowObserver:
    """Writes one run's progress through a buffered :class:`suite.runlog.RunLogger`."""

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
        self.logger.log_metrics(eval_metrics(record), step=record.step)
        self.logger.log_emulated(record.metrics, record.emulated_s)

    def on_progress(self, fraction: float, emulated_s: float) -> None:
        pass


class ProgressObserver:
    """Shows progress: a live bar on a terminal, one line per evaluation otherwise (CI logs)."""

    def __init__(self, label: str, progress: Any | None, task: Any | None, stream: Any = None) -> None:
        self.label = label
        self.progress = progress
        self.task = task
        self.stream = stream or sys.stderr
        self.last_acc: float | None = None

    def on_allocation(self, epoch: int, allocation: Allocation) -> None:
        pass

    def on_eval(self, record: EvalRecord) -> None:
        self.last_acc = record.metrics.get(M.VAL_ACCURACY)
        if self.progress is None:
            print(
                f"[{self.label}] step {record.step} epoch {record.epoch:.2f} emulated {record.emulated_s:.3f}s "
                f"val_acc {record.metrics[M.VAL_ACCURACY]:.4f} val_loss {record.metrics[M.VAL_LOSS]:.4f}"
                f"{' (final)' if record.final else ''}",
                file=self.stream,
                flush=True,
            )

    def on_progress(self, fraction: float, emulated_s: float) -> None:
        if self.progress is not None:
            acc = f" acc {self.last_acc:.3f}" if self.last_acc is not None else ""
            self.progress.update(
                self.task, completed=fraction * 1000, description=f"{self.label} · emu {emulated_s:.2f}s{acc}"
            )


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
