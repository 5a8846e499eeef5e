"""Timed warm-up on real hardware: each device's speed, profiled before the first allocation.

Some methods split the data by device speed *as profiled* (C-ADP: "device speeds taken from
profiling"), not as declared. On the emulated clock the speed is the clock's own charge
(:mod:`distrepro.timing.warmup_profile`, shared with the sensitivity replay). In a **throttled distributed
run** (wall time follows the emulated devices) the worker instead times ``steps`` real forward/backward
passes (after ``UNTIMED_PASSES`` untimed ones) on a scratch copy of the model, each paced to D x its
charge as in training; wall / D is the device's speed as a profiler on it would see it, including any
pass the host could not finish within its deadline. Unpaced (``dilation=None``) it is the host's raw
speed, for callers that want that.

Neither is charged to the run's clock or consumes the training data order: profiling happens
before training starts, and its batch comes from its own derived stream.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from distrepro.api.method import Batch
from distrepro.engine.streams import WorkerStream
from distrepro.job.resolve import Job
from distrepro.timing.warmup_profile import warmup_charge

#: passes run before timing starts on real hardware: first-call allocations, kernel selection, caches
UNTIMED_PASSES = 5


def warmup_batch(job: Job, rank: int) -> Batch:
    """A batch of ``rank``'s configured size, drawn from its own stream (not the training order)."""
    indices = torch.arange(len(job.bundle.train))
    stream = WorkerStream(job.bundle, indices, job.batch_sizes[rank], (*job.seed_parts, "rank", rank, "warmup"))
    return stream.next_batch()


def paced_elapsed(
    run_pass: Callable[[], None],
    charges: Sequence[float],
    dilation: float | None,
    clock: Callable[[], float] = time.perf_counter,
    sleep: Callable[[float], None] = time.sleep,
) -> float:
    """Wall seconds of one ``run_pass`` per charge, each paced to last at least D x its charge.

    Split from :func:`timed_speed` so the pacing arithmetic can be checked on a fake clock: the
    real passes' duration depends on whatever else the host is doing, the pacing must not.
    """
    elapsed = 0.0
    for charge in charges:
        start = clock()
        run_pass()
        if dilation is not None:  # throttled: the pass lasts D x its charge, as under the Pacer
            left = start + dilation * charge - clock()
            if left > 0:
                sleep(left)
        elapsed += clock() - start
    return elapsed


def timed_speed(
    job: Job, rank: int, steps: int, device: torch.device | None = None, dilation: float | None = None
) -> float:
    """Samples per second of ``steps`` real forward/backward passes (÷ ``dilation`` when throttled)."""
    batch = warmup_batch(job, rank)
    n = len(batch)
    if n == 0 or steps <= 0:
        return float("nan")
    device = device or torch.device("cpu")
    model = job.make_model().to(device)
    inputs, targets = batch.inputs.to(device), batch.targets.to(device)

    def run_pass() -> None:
        model.zero_grad(set_to_none=True)
        F.cross_entropy(model(inputs), targets).backward()

    for _ in range(UNTIMED_PASSES):
        run_pass()
    charges = [warmup_charge(job, rank, n, i) for i in range(steps)]
    elapsed = paced_elapsed(run_pass, charges, dilation)
    return steps * n / (elapsed / (dilation or 1.0))
