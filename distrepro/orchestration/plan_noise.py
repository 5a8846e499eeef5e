"""What a plan adds for the noise a profile declares: the slowest of p at every wait, in expectation.

Why: a plan's figures are central (each worker at its declared speed), but where a profile declares noise the
engines draw it (:class:`distrepro.timing.compute.ComputeModel`: each step's jitter, ``noise.compute_cv`` or the
device's own, with the workload's batch spread; each GPU's own speed, ``noise.gpu_cv``), and a synchronous method
waits for its slowest worker at every collective. Jitter is mean 1, so a worker's own time is unbiased; the wait
is not: it pays the expected largest of p factors (:func:`distrepro.timing.framework.expected_max_factor`). Between
two waits a worker's steps run back to back, so their jitter averages over the k steps in between while its GPU's
speed does not (:func:`distrepro.timing.framework.sync_cv`): a method that syncs every step pays the most, Local
SGD's rounds of H steps less. This module prices that expectation so a plan can print it beside its central
figure; the central figure stays the plan's ``step_s`` and ``total_s``.

Left out (said in ``assumes``): straggler steps, link noise, the GPU's speed acting on the step's GPU part only
(charged here on the whole compute), ranks of different speeds (the largest sigma stands for all).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from typing import Any

from distrepro.job.resolve import Job
from distrepro.timing.compute import sigma_of_cv
from distrepro.timing.framework import expected_max_factor, sync_cv

ASSUMES = (
    "the expected slowest of p at every wait for the noise the profile declares (each step's jitter averaged over "
    "the steps between two waits, each GPU's own speed not); no stragglers or link noise, ranks of different "
    "speeds taken at the largest sigma, the GPU's speed charged on all of a step's compute"
)


def cv_of_sigma(sigma: float) -> float:
    """The coefficient of variation of a mean-1 lognormal of ``sigma``: √(exp(σ²) − 1), the inverse of
    :func:`~distrepro.timing.compute.sigma_of_cv`."""
    return math.sqrt(math.expm1(sigma * sigma))


def declared_sigmas(job: Job) -> tuple[float, float]:
    """(step sigma, GPU-speed sigma): the largest over the job's ranks of what the engines draw for it (a device's
    own lognormal jitter, else the profile's ``noise.compute_cv``, in quadrature with the workload's
    ``step_jitter_sigma``; ``noise.gpu_cv`` on GPUs)."""
    noise = job.profile.noise
    default = sigma_of_cv(noise.compute_cv) if noise is not None else 0.0
    gpu = sigma_of_cv(noise.gpu_cv) if noise is not None else 0.0
    workload = job.compute.workload_name or ""
    step_sigma = gpu_sigma = 0.0
    for rank in range(job.world_size):
        device = job.profile.device(rank)
        own = device.jitter.sigma if device.jitter.kind == "lognormal" else default
        step_sigma = max(step_sigma, math.hypot(own, device.step_jitter_sigma.get(workload, 0.0)))
        gpu_sigma = max(gpu_sigma, gpu if device.kind == "gpu" else 0.0)
    return step_sigma, gpu_sigma


def wait_factor(p: int, steps_between: int, step_sigma: float, gpu_sigma: float) -> float:
    """The expected slowest of ``p`` workers' compute over ``steps_between`` steps, as a factor on its mean."""
    return _factor(p, steps_between, round(step_sigma, 12), round(gpu_sigma, 12))


@cache
def _factor(p: int, steps_between: int, step_sigma: float, gpu_sigma: float) -> float:
    cv = sync_cv(max(1, steps_between), cv_of_sigma(step_sigma), cv_of_sigma(gpu_sigma))
    return expected_max_factor(p, cv)


def compute_factor(job: Job, round_lengths: Sequence[int] | None) -> float:
    """The mean factor on a step's compute: one wait per step, or one per round of ``round_lengths`` steps (each
    round's steps weighted by its length). 1.0 where the profile declares no noise or one rank runs."""
    step_sigma, gpu_sigma = declared_sigmas(job)
    p = job.world_size
    if p <= 1 or (step_sigma == 0 and gpu_sigma == 0):
        return 1.0
    if not round_lengths:
        return wait_factor(p, 1, step_sigma, gpu_sigma)
    total = sum(round_lengths)
    return sum(h * wait_factor(p, h, step_sigma, gpu_sigma) for h in round_lengths) / total


def expected_block(factor: float, step_s: float, total_s: float | str) -> dict[str, Any]:
    """The plan's ``expected`` entry: the factor, the step and the run with it (or why the run is not priced)."""
    return {"compute_factor": factor, "step_s": step_s, "total_s": total_s, "assumes": ASSUMES}
