"""What every rank reports at an evaluation, and how the reports become one :class:`EvalRecord`.

Both engines build an evaluation from the same per-rank reports, whatever carried them (a list in
one process, an object gather or the c10d store between processes), so the fields of an
evaluation, and in particular how ``ctx.record`` values are aggregated, cannot depend on the engine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from distrepro import metrics as M
from distrepro.job.results import EvalRecord, WorkerTotals


@dataclass(frozen=True)
class Progress:
    """Where training was, as the reporting process saw it (global units, see
    :mod:`distrepro.timing.budget_schedule`)."""

    step: int
    epoch: float
    samples: int
    gradients: int
    emulated_s: float
    wall_s: float
    throttled_s: float | None = None


@dataclass(frozen=True)
class RankReport:
    """One rank's contribution to an evaluation: its accounting, its records, its training losses and,
    when the run scores every replica (``eval.replicas``), its own replica's metrics."""

    totals: WorkerTotals
    records: dict[str, float]
    loss_sum: float
    loss_count: int
    progress: Progress
    replica: dict[str, float] | None = None


def aggregate_records(per_rank: Mapping[int, Mapping[str, float]]) -> dict[str, float]:
    """``ctx.record`` values of every rank → ``{name: mean, f"{name}/rank{r}": value}``.

    The mean is over the ranks that recorded ``name`` (summed in rank order, so it is the same float
    on every engine); each rank's own latest value is kept next to it, since a mean alone hides what
    heterogeneous workers did (C-ADP's fast devices take more ``local_steps`` than slow ones).
    """
    names: list[str] = []
    for rank in sorted(per_rank):
        names.extend(n for n in per_rank[rank] if n not in names)
    out: dict[str, float] = {}
    for name in names:
        values = [(r, float(per_rank[r][name])) for r in sorted(per_rank) if name in per_rank[r]]
        total = 0.0
        for _, v in values:
            total += v
        out[name] = total / len(values)
        out.update({M.per_rank(name, r): v for r, v in values})
    return out


def assemble(reports: Sequence[RankReport], metrics: dict[str, float], final: bool, lockstep: bool) -> EvalRecord:
    """One evaluation from every rank's report and the evaluated model's ``metrics``.

    Progress is the earliest report's (asynchronous ranks observe a crossed evaluation point at
    their own next step; the first to see it saw it where it was crossed). The emulated time is
    the latest clock for lockstep and final evaluations (everyone has arrived there), and the
    progress' own time for an asynchronous evaluation in flight. Wall times are rank 0's.
    """
    by_rank = sorted(reports, key=lambda r: r.totals.rank)
    first = min(by_rank, key=lambda r: r.progress.gradients).progress
    count = sum(r.loss_count for r in by_rank)
    metrics = dict(metrics)
    metrics[M.TRAIN_LOSS] = sum(r.loss_sum for r in by_rank) / count if count else float("nan")
    emulated = max(r.totals.clock_s for r in by_rank) if (final or lockstep) else first.emulated_s
    return EvalRecord(
        step=first.step,
        epoch=first.epoch,
        samples=first.samples,
        emulated_s=emulated,
        wall_s=by_rank[0].progress.wall_s,
        metrics=metrics,
        workers=[r.totals for r in by_rank],
        method_records=aggregate_records({r.totals.rank: r.records for r in by_rank}),
        final=final,
        throttled_s=by_rank[0].progress.throttled_s,
    )
