"""The engine interface: what an engine supplies to the one harness loop (:mod:`distrepro.engine.loop`).

The loop owns everything that defines a run's result: the step body, budgets, re-allocation,
which model is evaluated, how records are aggregated, how evaluations and the result are
assembled, what a checkpoint holds. An engine only says *where the workers live and how they
meet*:

* which ranks live in this process (all of them in-process, one per process under
  torch.distributed), their ``Comm``, clock and device, and how their loops are run (greenlets
  ordered by virtual time, or the process's main thread);
* where the end-of-step bookkeeping runs: :meth:`Transport.rendezvous` for lockstep methods (the
  in-process engine: once, when every worker has arrived; a distributed rank: on every rank, each
  computing the same global progress) and :meth:`Transport.in_order` for asynchronous ones (the
  in-process engine: as an event in virtual-time order; a distributed rank: at once, with global
  counts from the c10d store, :meth:`Transport.count_gradient`);
* how per-rank values meet: :meth:`Transport.gather` (uncharged control traffic) and
  :meth:`Transport.evaluate`, which brings every rank's report and the model the method asked to
  be evaluated (``evaluated_on``) to the process that evaluates;
* pacing (throttling), wall time and the profiling warm-up, which differ between one process and
  real ones.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Literal, Protocol

import torch

from distrepro.api.method import Allocation, Comm
from distrepro.engine.clock import VirtualClock
from distrepro.engine.rank_reports import Progress, RankReport
from distrepro.engine.worker_slot import Slot
from distrepro.job.results import Span
from distrepro.timing.budget_schedule import TrainingSchedule


class HarnessView(Protocol):
    """What a transport sees of the harness (:class:`distrepro.engine.loop.Harness`) it drives: its slots, where
    training is, and where evaluations go back. A protocol, so that the loop imports the transports' contract and
    not the other way round."""

    slots: list[Slot]
    alloc: Allocation | None
    schedule: TrainingSchedule

    def progress(self) -> Progress: ...

    def evaluated(self, model: torch.nn.Module, reports: list[RankReport], final: bool, consensus: float) -> None: ...


class Transport(Protocol):
    """Scheduling, transport and process management of one engine (see the module docstring)."""

    @property
    def ranks(self) -> Sequence[int]:
        """The ranks whose workers live in this process, in rank order."""
        ...

    #: whether this process evaluates, notifies observers of evaluations and returns the result
    reporter: bool
    device: torch.device

    def bind(self, harness: HarnessView) -> None:
        """Called once by the harness after it has built its slots (workers, methods): the transport
        runs their loops, and hands evaluations back to :meth:`HarnessView.evaluated`."""

    def endpoint(self, rank: int) -> tuple[torch.nn.Module, Comm, VirtualClock]:
        """The model replica, ``Comm`` and clock of local ``rank``."""

    def running(self) -> AbstractContextManager[None]:
        """Context of the whole run (process-wide settings such as torch's thread count)."""

    def prepare(self, first_allocation: Callable[[], Allocation]) -> None:
        """Before the warm-up and the first allocation (calibration of throttling)."""

    def profile(self, steps: int) -> tuple[float, ...]:
        """Every rank's warm-up speed (:mod:`distrepro.timing.warmup_profile`), identical on every process."""

    def run_workers(self, body: Callable[[Slot], None]) -> None:
        """Run ``body`` for every local slot to completion."""

    def started(self, slot: Slot) -> None:
        """A worker has set up (and resumed) and is about to take its first step."""

    def finished(self, slot: Slot) -> None:
        """A worker has finalized; it will take no more steps."""

    def rendezvous(self, slot: Slot, samples: int, then: Callable[[int, float], bool]) -> bool:
        """End of a lockstep iteration: run ``then(samples of all workers, latest clock)``; its answer (stop?)."""

    def in_order(self, slot: Slot, then: Callable[[], bool]) -> bool:
        """End of an asynchronous worker's step: run ``then()`` in the engine's order; its answer (stop?)."""

    def count_gradient(self, schedule: TrainingSchedule, samples: int, clock_s: float) -> None:
        """Count one asynchronous gradient step of ``samples`` into ``schedule`` (global progress)."""

    def gather(self, values: list[Any]) -> list[Any]:
        """One value per local slot → every rank's value, in rank order (uncharged)."""

    def barrier(self) -> None:
        """Every process waits for the others (uncharged)."""

    def evaluate(
        self,
        models: list[torch.nn.Module],
        reports: list[RankReport],
        eval_on: Literal["average", "rank0"],
        final: bool,
        blocking: bool,
        members: tuple[int, ...] | None = None,
    ) -> None:
        """Bring ``eval_on``'s model and every rank's report to the reporter, for
        :meth:`Harness.evaluated <distrepro.engine.loop.Harness.evaluated>` there, with the consensus
        distance over the replicas of ``members`` (the method's ``trained_ranks``; None: every rank).

        ``blocking``: every rank evaluates at this point together (lockstep, final); otherwise ranks
        reach it at their own pace and the evaluation may complete later, but before the final one.
        """

    def wall_s(self) -> float:
        """Wall seconds since training started."""

    def throttled_s(self) -> float | None:
        """Wall time / dilation when throttled, else None."""

    def timeline(self, local: list[Span]) -> list[Span]:
        """Every rank's timeline spans (on the reporter)."""
