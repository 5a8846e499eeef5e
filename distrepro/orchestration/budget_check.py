"""Refuse, before anything trains, a run that cannot finish or whose emulated time the store cannot hold.

Why: ``budget.epochs: 1e30`` trained silently until someone killed it, and a hardware profile figure off by
hundreds of orders of magnitude (a bandwidth of 1e-300 GB/s, a throughput of 1e-300 samples/s) trained and
then failed while logging, because the ``emu/*`` series are logged at step = emulated milliseconds and
MLflow stores steps as 64-bit integers. Both can be told from the built job in microseconds, so each is one
:class:`~distrepro.errors.ConfigError` naming the file, the field and the value.

The time estimate is deliberately rough and generic (it reads only declared speeds and links, whatever the
schema says about how they are derived): compute from each rank's declared speed for its batch, plus the
model's bytes sent there and back once over the slowest link between two ranks, per step. It is compared
with limits that leave three orders of magnitude to spare, so only a figure wrong by far more than any
estimate's error is refused.
"""

from __future__ import annotations

import math
from pathlib import Path

from distrepro.config.run_config import MAX_STEPS
from distrepro.errors import ConfigError
from distrepro.job.resolve import Job

#: most emulated seconds the store can record: ``emu/*`` points are logged at step = emulated ms, an int64
STORE_LIMIT_S = (2**63 - 1) / 1000
#: most emulated seconds a run may be estimated at: the store's limit, with 1000x to spare for the estimate
MAX_EMULATED_S = STORE_LIMIT_S / 1000


def _compute_s(job: Job) -> tuple[float, int]:
    """Emulated compute seconds a step at the declared speeds, and the rank that sets it: the slowest for a
    lockstep method, the fastest for an asynchronous one (whose steps count gradients of any worker)."""
    per_rank = [b / job.compute.declared_samples_per_s(r) for r, b in enumerate(job.batch_sizes)]
    pick = max if job.method.cls.synchronous else min
    rank = pick(range(len(per_rank)), key=per_rank.__getitem__)
    return per_rank[rank], rank


def _comm_s(job: Job) -> tuple[float, tuple[int, int] | None]:
    """Seconds to send the model's bytes there and back over the slowest link between two ranks, and the first
    pair of ranks (in order) it joins. Visits each distinct link once with the first pair it joins, so the result
    is what a scan of every pair gives, at K = 10,000 too (50 million pairs, a handful of links)."""
    nbytes = job.proxy_param_bytes * job.bytes_scale
    worst, pair = 0.0, None
    for first, link in job.profile.link_classes().first_pairs():
        seconds = link.transfer_s(nbytes)
        if pair is None or seconds > worst:
            worst, pair = seconds, first
    return 2 * worst, pair


def _figure(job: Job, compute_s: float, rank: int, comm_s: float, pair: tuple[int, int] | None) -> tuple[str, str]:
    """(field, what it says) of the profile figure that makes a step long, as a user finds it in the file."""
    profile = job.profile
    if pair is None or compute_s >= comm_s:
        speed = job.compute.declared_samples_per_s(rank)
        what = f"rank {rank} ({profile.device(rank).name}) computes {speed:.3g} samples/s for this run's workload"
        return profile.device_path(rank), what
    a, b = pair
    link = profile.link(a, b)
    field = "network.intra_node" if profile.node_index(a) == profile.node_index(b) else "network.inter_node"
    what = (
        f"the link between ranks {a} and {b} (this or a NIC on the way) has {link.latency_s * 1e6:.3g} us latency "
        f"and {link.bandwidth_bytes_per_s / 1e9:.3g} GB/s"
    )
    return field, what


def check_budget(job: Job, source: str | Path | None = None) -> None:
    """Raise :class:`ConfigError` if ``job`` asks for more steps than a run can take (naming the budget), or
    would emulate more time than the tracking store can record (naming the profile figure that makes it so)."""
    budget = job.config.budget
    unit, amount = budget.unit, budget.amount
    field = f"budget.{unit}"
    compute_s, rank = _compute_s(job)
    comm_s, pair = _comm_s(job)
    step_s = compute_s + comm_s
    figure, says = _figure(job, compute_s, rank, comm_s, pair)
    if unit == "emulated_seconds":
        if amount > MAX_EMULATED_S:
            raise ConfigError(source, field, f"{amount:.3g} s is more than a run may emulate ({MAX_EMULATED_S:.3g} s)")
        steps = amount / step_s if step_s > 0 else math.inf
        what = f"{amount:g} s at about {step_s:.3g} s a step ({says}) is {steps:.3g} steps"
    elif unit == "steps":
        steps, what = amount, f"{amount:.3g} steps"
    else:
        global_batch = max(1, sum(job.batch_sizes))
        steps = (amount * len(job.bundle.train) if unit == "epochs" else amount) / global_batch
        what = f"{amount:g} {unit} is {steps:.3g} steps of {global_batch} samples"
    if steps > MAX_STEPS:
        days = MAX_STEPS * 1e-3 / 86400
        raise ConfigError(
            source,
            field,
            f"{what}: more than the {MAX_STEPS:.0e} a run may take (each step trains for real: at 1 ms a step "
            f"that is {days:.1f} days)",
        )
    total_s = max(amount, step_s) if unit == "emulated_seconds" else steps * step_s
    if total_s > MAX_EMULATED_S:
        raise ConfigError(
            job.profile.origin,
            figure,
            f"{says}: one step would take {step_s:.3g} s of emulated time and this run ({field}={amount:g}) "
            f"{total_s:.3g} s, more than the tracking store can record ({STORE_LIMIT_S:.3g} s, refused above "
            f"{MAX_EMULATED_S:.3g} s); the figure is far off",
        )
