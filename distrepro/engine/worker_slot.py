"""One worker living in a process, as the harness loop holds it: its context, method, data and losses.

Apart from :mod:`distrepro.engine.loop` so that the transports and checkpoints, which the loop drives, can name
a slot without importing the loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from distrepro.api.method import Method
from distrepro.engine.clock import VirtualClock
from distrepro.engine.harness_worker import HarnessWorker
from distrepro.engine.rank_reports import Progress, RankReport
from distrepro.engine.run_setup import EmptyStream
from distrepro.engine.streams import WorkerStream
from distrepro.job.results import WorkerTotals


@dataclass
class Slot:
    """One worker living in this process: its context, its method instance, its data, its losses."""

    rank: int
    worker: HarnessWorker
    method: Method
    stream: WorkerStream | EmptyStream | None = None
    loss_sum: float = 0.0  # training losses since this rank's last report
    loss_count: int = 0
    #: scores this rank's replica at every evaluation (``eval.replicas``), untimed
    score_replica: Callable[[torch.nn.Module], dict[str, float]] | None = None

    def report(self, progress: Progress) -> RankReport:
        """This rank's part of an evaluation; its training-loss sums start over."""
        w = self.worker
        totals = worker_totals(w.clock, w.comm.bytes_sent, w)
        replica = None
        if self.score_replica is not None:
            started = time.perf_counter()
            replica = self.score_replica(w.model)
            if w.pacer is not None:  # untimed: a throttled rank's schedule leaves the scoring out
                w.pacer.shift(time.perf_counter() - started)
        out = RankReport(totals, dict(w.records), self.loss_sum, self.loss_count, progress, replica)
        self.loss_sum, self.loss_count = 0.0, 0
        return out


def worker_totals(clock: VirtualClock, bytes_sent: int, worker: Any) -> WorkerTotals:
    """One worker's totals at an evaluation, read off its clock and its counters."""
    return WorkerTotals(
        rank=clock.rank,
        clock_s=clock.t,
        compute_s=clock.compute_s,
        comm_s=clock.comm_s,
        idle_s=clock.idle_s,
        bytes_sent=int(bytes_sent),
        samples=int(worker.samples_computed),
        gradients=int(worker.gradients),
    )
