"""What an engine reports: timeline spans, evaluation records, per-worker totals, the run result.

Engine-independent, so the MLflow logging and the progress display work the same for the
in-process and the torch.distributed engines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from distrepro.api.method import Allocation

SpanKind = Literal["compute", "comm", "idle"]


@dataclass(frozen=True)
class Span:
    """One interval of a worker's timeline, in virtual seconds."""

    rank: int
    kind: SpanKind
    start_s: float
    end_s: float
    step: int


@dataclass(frozen=True)
class WorkerTotals:
    """Cumulative accounting of one worker at an evaluation point (virtual seconds, bytes)."""

    rank: int
    clock_s: float
    compute_s: float
    comm_s: float
    idle_s: float
    bytes_sent: int  # whole bytes (distrepro.timing.charges rounds each message)
    samples: int
    gradients: int


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
    #: the distributed engine under throttling: every rank's pacing summary (how far behind its schedule it fell)
    pacing: list[dict[str, float]] | None = None
