"""The time a plan predicts: compute from the declared speeds, communication from the method's typed plan.

Each :class:`~distrepro.api.Transfer` of a :class:`~distrepro.api.MethodPlan` is priced once by the collective
model (:class:`~distrepro.timing.timemodel.CommCostModel`, noise free: a plan's figure is the central one) with
the algorithm and protocol it runs with, then spread over steps: ``per="step"`` occurrences count as they are,
``per="round"`` ones times the rounds over the steps, ``per="run"`` ones over the steps. A lockstep method's step
is its slowest worker's compute (or the communication that overlaps it, if longer) plus the blocking
communication. An asynchronous method's workers each go at their own pace, so the run's rate is the sum of their
rates: its ``steps`` budget (gradient computations over the world size) takes ``steps · W / Σ_r 1/step_r``.
"""

from __future__ import annotations

from typing import Any

from distrepro.api.method import PlanSetting
from distrepro.api.plan import TWO_RANK_PATTERNS, MethodPlan, Transfer
from distrepro.spec.job import Job
from distrepro.timing.timemodel import CommCostModel

NOT_ESTIMATED = "not estimated"


def _ranks(job: Job, participants: str) -> list[int]:
    """The ranks a transfer's ``participants`` names: all (``world``), the first node's ranks (``node``), or the
    first rank of the first two nodes (``pair``: a two-rank message across the network where there is one)."""
    world = list(range(job.world_size))
    if participants == "node":
        return [r for r in world if job.profile.node_index(r) == 0]
    if participants == "pair":
        heads = [next(r for r in world if job.profile.node_index(r) == i) for i in range(len(job.profile.nodes))]
        return heads[:2] if len(heads) > 1 else world[:2]
    return world


def price(job: Job, cost: CommCostModel, transfer: Transfer) -> dict[str, Any]:
    """One occurrence of ``transfer``: seconds, and for a collective the algorithm and protocol it runs with."""
    pattern, nbytes = transfer.pattern, float(transfer.bytes)
    ranks = _ranks(job, "pair" if pattern in TWO_RANK_PATTERNS else transfer.participants)
    out: dict[str, Any] = {"pattern": pattern, "bytes": nbytes, "ranks": len(ranks)}
    if pattern == "parameter_server":
        return out | {"seconds": cost.parameter_server(ranks, nbytes)}
    if pattern in TWO_RANK_PATTERNS:
        if len(ranks) < 2:
            return out | {"seconds": 0.0}
        a, b = ranks[0], ranks[1]
        return out | {"seconds": cost.p2p(a, b, nbytes) if pattern == "p2p" else cost.exchange(a, b, nbytes)}
    size = nbytes / len(ranks) if pattern == "all_gather" else nbytes  # ``bytes``: the gathered vector
    how = cost.collective(pattern, ranks, size, src=0 if pattern == "broadcast" else None)
    out |= {"algorithm": how.algorithm, "protocol": how.protocol}
    return out | {"seconds": how.seconds, "latency_s": how.latency_s}


def _per_step(transfer: Transfer, plan: MethodPlan, steps: int | None) -> float | str:
    """Occurrences per step, or why it cannot be said."""
    if transfer.per == "step":
        return transfer.count
    if not steps:
        return "steps unknown before the run (emulated_seconds budget)"
    if transfer.per == "run":
        return transfer.count / steps
    if plan.rounds is None:
        return "a transfer per round, but the plan gives no round_lengths"
    return transfer.count * plan.rounds / steps


def estimate(job: Job, setting: PlanSetting, plan: MethodPlan | None) -> dict[str, Any]:
    """The ``time`` section of a plan: compute per worker, each transfer priced, the step and the run."""
    alloc, steps = setting.allocation, setting.total_steps
    compute = [job.compute.nominal_step_seconds(r, b) for r, b in enumerate(alloc.batch_sizes)]
    overhead = [job.compute.overhead_s(r) if b > 0 else 0.0 for r, b in enumerate(alloc.batch_sizes)]
    out: dict[str, Any] = {"compute_s_per_step": compute, "slowest_compute_s_per_step": max(compute)}
    if any(overhead):
        out["step_overhead_s"] = overhead  # the part of each compute time that does not shrink with the batch
    out["collective_algorithm"] = job.profile.collective_algorithm
    why = (
        "the method does not say what it sends"
        if plan is None
        else plan.not_estimated
        if plan.not_estimated is not None
        else None
    )
    priced: list[dict[str, Any]] = []
    blocking = overlapped = 0.0
    cost = job.cost.noise_free()
    for transfer in plan.transfers if plan is not None and why is None else ():
        times = _per_step(transfer, plan, steps)  # type: ignore[arg-type]
        if isinstance(times, str):
            why = times
            break
        entry = price(job, cost, transfer) | {"per_step": times}
        if transfer.overlaps_compute:
            entry["overlaps_compute"] = True
            overlapped += entry["seconds"] * times
        else:
            blocking += entry["seconds"] * times
        priced.append(entry)
    if why is not None:
        out.update(comm_s_per_step=NOT_ESTIMATED, step_s=NOT_ESTIMATED, total_s=NOT_ESTIMATED, why=why)
        return out
    out["collectives"] = priced
    if job.method.cls.synchronous:
        step_s = max(max(compute), overlapped) + blocking
        total: float | str = step_s * steps if steps else NOT_ESTIMATED
        assumes = "declared speeds and step overheads, lockstep, the participants' groups, overlap only as declared"
    else:
        own = [max(c, overlapped) + blocking for c in compute]
        step_s = len(own) / sum(1.0 / s for s in own)  # the run's seconds per step of the budget
        total = step_s * steps if steps else NOT_ESTIMATED
        out["worker_step_s"] = own
        assumes = (
            "declared speeds, asynchronous: each worker at its own pace (the run's rate is the sum of theirs), "
            "two-rank transfers priced on one pair of nodes"
        )
    out.update(comm_s_per_step=blocking + overlapped, step_s=step_s, total_s=total, assumes=assumes)
    return out
