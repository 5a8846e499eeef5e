"""A device's speed as the emulated clock would profile it, before the first allocation.

Some methods split the data by device speed *as profiled* (C-ADP: "device speeds taken from profiling"), not as
declared. When a method asks for it (:meth:`distrepro.api.method.Method.warmup_steps`), the engine hands ``allocate``
each worker's speed in ``ClusterView.profiled_samples_per_s``. On the emulated clock (the in-process engine, and the
distributed engine unthrottled) that speed is what the clock charges for ``steps`` batches of the worker's configured
size, so a profile's jitter and stragglers show in it and nothing is computed. This is a charging rule, shared by both
engines and the sensitivity replay, so it lives with the rest of emulated time; the real, timed warm-up of a throttled
distributed run (passes on the host, paced) stays in :mod:`distrepro.engine.warmup`.

Nothing here is charged to the run's clock: profiling happens before training starts. Negative step indices keep the
warm-up's clock noise apart from training's.
"""

from __future__ import annotations

from typing import Protocol


class ChargedJob(Protocol):
    """What the profile needs of a job (:class:`distrepro.job.resolve.Job` is one): sizes and the clock's charge."""

    @property
    def batch_sizes(self) -> tuple[int, ...]: ...

    @property
    def world_size(self) -> int: ...

    def compute_seconds(self, rank: int, n: int, step_index: int, at_s: float) -> float: ...


def warmup_charge(job: ChargedJob, rank: int, n: int, i: int) -> float:
    """The clock's charge for warm-up pass ``i`` (negative step indices: noise apart from training's)."""
    return job.compute_seconds(rank, n, -(i + 1), 0.0)


def emulated_speed(job: ChargedJob, rank: int, steps: int) -> float:
    """Samples per emulated second over ``steps`` warm-up batches, as the clock would charge them."""
    n = job.batch_sizes[rank]
    if n == 0 or steps <= 0:
        return float("nan")
    charge = job.compute_seconds  # warmup_charge inlined: one call less per pass (a report profiles thousands)
    return steps * n / sum(charge(rank, n, -(i + 1), 0.0) for i in range(steps))


def emulated_profile(job: ChargedJob, steps: int) -> tuple[float, ...]:
    """Every worker's :func:`emulated_speed`: a pure function of the job, so any process can compute
    it for all ranks without communicating."""
    return tuple(emulated_speed(job, r, steps) for r in range(job.world_size))
