"""The time a plan predicts: compute from the declared speeds, communication from the method's typed plan.

Each :class:`~distrepro.api.Transfer` of a :class:`~distrepro.api.MethodPlan` is priced once by the collective
model (:class:`~distrepro.timing.timemodel.CommCostModel`, noise free: a plan's figure is the central one) with
the algorithm and protocol it runs with, then spread over steps: ``per="step"`` occurrences count as they are,
``per="round"`` ones times the rounds over the steps, ``per="run"`` ones over the steps. A lockstep method's step
is its slowest worker's compute (or the communication that overlaps it, if longer) plus the blocking
communication. An asynchronous method's workers each go at their own pace, so the run's rate is the sum of their
rates: its ``steps`` budget (gradient computations over the world size) takes ``steps · W / Σ_r 1/step_r``.

These figures are central (noise free). Where the profile declares noise, a lockstep method's plan adds
``expected``: the same step and run with the slowest of p at every wait (:mod:`distrepro.orchestration.plan_noise`).
"""

from __future__ import annotations

from typing import Any

from distrepro.api.method import PlanSetting
from distrepro.api.overlap import emulated_buckets
from distrepro.api.plan import TWO_RANK_PATTERNS, MethodPlan, Transfer
from distrepro.config.run_config import index_spans
from distrepro.job.resolve import Job
from distrepro.orchestration.plan_noise import compute_factor, expected_block
from distrepro.timing.framework import bucketed_step_overhead_s, costs, ddp_step_s
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


def _rank_groups(job: Job, alloc: Any, compute: list[float], overhead: list[float]) -> list[dict[str, Any]]:
    """Ranks with the same device, batch and compute time, as one entry each (a 512-GPU profile of one card is one
    line, not 512)."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for r, b in enumerate(alloc.batch_sizes):
        groups.setdefault((job.profile.device(r).name, b, compute[r], overhead[r]), []).append(r)
    out = []
    for (device, batch, seconds, fixed), ranks in groups.items():
        entry = {"ranks": index_spans(ranks), "count": len(ranks), "device": device, "batch": batch}
        out.append(entry | {"compute_s": seconds} | ({"step_overhead_s": fixed} if fixed else {}))
    return out


def _overlapped_step(job: Job, cost: CommCostModel, compute: list[float]) -> dict[str, Any] | None:
    """The step of a DDP-style overlapped all-reduce of the emulated model, estimated as the engine charges it: its
    buckets (:func:`distrepro.api.overlap.emulated_buckets`) priced one by one, launched when backward reaches them,
    plus the reducer's cost and the collectives' contention with backward (:mod:`distrepro.timing.framework`), at
    the rank where that ends last; None without the workload's layer table. Left out: flows sharing links (the
    engine's max-min sharing), noise, jitter."""
    layers = job.workload.layers if job.workload is not None else None
    if layers is None:
        return None
    world = list(range(job.world_size))
    priced = [(b.ready, cost.all_reduce(world, b.nbytes)) for b in emulated_buckets(layers)]
    backward = job.profile.backward_fraction()
    figures = costs(job.profile)
    worst: tuple[float, float] = (0.0, 0.0)
    seen: set[tuple[float, float]] = set()
    for rank, seconds in enumerate(compute):
        extra = bucketed_step_overhead_s(job.profile.device(rank), layers, figures)
        if (seconds, extra) in seen:
            continue
        seen.add((seconds, extra))
        step = ddp_step_s(seconds, backward, priced, extra, contention=figures.contention)
        worst = max(worst, (step, extra))
    return {"step_s": worst[0], "buckets": len(priced), "framework_s": worst[1]}


def _ddp_overlap(job: Job, priced: list[dict[str, Any]]) -> bool:
    """Whether the step is DDP's: one all-reduce per step that the method overlaps with backward
    (``overlap: true``), which the engine charges bucket by bucket over the emulated model's layers."""
    return (
        bool(getattr(job.params, "overlap", False))
        and len(priced) == 1
        and priced[0]["pattern"] == "all_reduce"
        and priced[0]["per_step"] == 1
    )


def estimate(job: Job, setting: PlanSetting, plan: MethodPlan | None) -> dict[str, Any]:
    """The ``time`` section of a plan: compute per worker, each transfer priced, the step and the run."""
    alloc, steps = setting.allocation, setting.total_steps
    compute = [job.compute.nominal_step_seconds(r, b) for r, b in enumerate(alloc.batch_sizes)]
    overhead = [job.compute.overhead_s(r) if b > 0 else 0.0 for r, b in enumerate(alloc.batch_sizes)]
    out: dict[str, Any] = {"compute": _rank_groups(job, alloc, compute, overhead)}
    out["slowest_compute_s_per_step"] = max(compute)
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
    ddp = _overlapped_step(job, cost, compute) if _ddp_overlap(job, priced) else None
    # the slowest of p at each wait, for the noise the profile declares (lockstep methods that send something)
    rounds = plan.round_lengths if plan is not None else None
    factor = compute_factor(job, rounds) if job.method.cls.synchronous and priced else 1.0
    if ddp is not None:  # the all-reduce in the emulated model's DDP buckets, as the engine charges it
        step_s = ddp["step_s"]
        if factor > 1.0:
            noisy = _overlapped_step(job, cost, [c * factor for c in compute])
            noisy_s = noisy["step_s"] if noisy else step_s
            out["expected"] = expected_block(factor, noisy_s, _run_s(noisy_s, steps))
        total: float | str = _run_s(step_s, steps)
        out["overlap"] = {k: v for k, v in ddp.items() if k != "step_s"}
        assumes = (
            "declared speeds and step overheads, lockstep; the all-reduce in the emulated model's DDP buckets, "
            "overlapped with backward and the reducer's cost added, as the engine charges them; each bucket priced "
            "alone (the engine also shares links between concurrent flows), no noise, no jitter"
        )
    elif job.method.cls.synchronous:
        step_s = max(max(compute), overlapped) + blocking
        total = _run_s(step_s, steps)
        if factor > 1.0:
            noisy_s = max(max(compute) * factor, overlapped) + blocking
            out["expected"] = expected_block(factor, noisy_s, _run_s(noisy_s, steps))
        why_not = "the method does not overlap" if not getattr(job.params, "overlap", False) else "no layer table"
        assumes = "declared speeds and step overheads, lockstep, the participants' groups, overlap only as declared" + (
            "" if overlapped else f"; no overlap: an upper bound of what the engine charges ({why_not})"
        )
    else:
        own = [max(c, overlapped) + blocking for c in compute]
        step_s = len(own) / sum(1.0 / s for s in own)  # the run's seconds per step of the budget
        total = _run_s(step_s, steps)
        out["worker_step_s"] = own
        assumes = (
            "declared speeds, asynchronous: each worker at its own pace (the run's rate is the sum of theirs), "
            "two-rank transfers priced on one pair of nodes"
        )
    out.update(comm_s_per_step=blocking + overlapped, step_s=step_s, total_s=total, assumes=assumes)
    if "expected" in out:  # after the central figures, as a plan prints them
        out["expected"] = out.pop("expected")
    return out


def _run_s(step_s: float, steps: int | None) -> float | str:
    """The run's seconds at ``step_s`` a step, or why it is not priced (a budget not counted in steps)."""
    return step_s * steps if steps else NOT_ESTIMATED
