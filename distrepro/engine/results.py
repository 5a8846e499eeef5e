"""What an engine reports: evaluation records, per-worker totals, the run result, observers.

Engine-independent, so the MLflow logging and the progress display work the same for the
in-process and the torch.distributed engines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from distrepro.api.method import Allocation
from distrepro.engine.clock import Span, VirtualClock


@dataclass(frozen=True)
class WorkerTotals:
    """Cumulative accounting of one worker at an evaluation point (virtual seconds, bytes)."""

    rank: int
    clock_s: float
    compute_s: float
    comm_s: float
    idle_s: float
    bytes_sent: int  # whole bytes (distrepro.engine.charges rounds each message)
    samples: int
    gradients: int

    @staticmethod
    def of(clock: VirtualClock, bytes_sent: int, worker: Any) -> WorkerTotals:
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


@dataclass(frozen=True)
class EvalRecord:
    """One evaluation: where training was (global units) and what the model scored."""

    step: int
    epoch: float
    samples: int
    emulated_s: float
    wall_s: float
    metrics: dict[str, float]
    workers: list[WorkerTotals]
    method_records: dict[str, float] = field(default_factory=dict)
    final: bool = False
    throttled_s: float | None = None  # wall time / dilation, when the run was throttled


@dataclass
class RunResult:
    evals: list[EvalRecord]
    final: EvalRecord
    timeline: list[Span]
    allocations: list[tuple[int, Allocation]]
    wall_s: float
    emulated_s: float
    time_to_target_s: float | None
    step_to_target: int | None
    models: list[Any] = field(default_factory=list, repr=False)


class RunObserver(Protocol):
    """Receives progress while a run trains (MLflow logger, progress bar)."""

    def on_allocation(self, epoch: int, allocation: Allocation) -> None: ...

    def on_eval(self, record: EvalRecord) -> None: ...

    def on_progress(self, fraction: float, emulated_s: float) -> None: ...
