"""A job on its profile without the ``noise`` block: for tests of the time model's exact arithmetic."""

from __future__ import annotations

import dataclasses

from distrepro.job.resolve import Job
from distrepro.timing.timemodel import CommCostModel, ComputeModel


def quiet_job(job: Job) -> Job:
    """``job`` with clock noise removed (compute and link), every seed and speed unchanged."""
    profile = job.profile.model_copy(update={"noise": None})
    compute = ComputeModel(profile, job.compute.workload_name, job.compute.flops_per_sample, job.compute.seed_parts)
    cost = CommCostModel(profile, job.cost.bytes_scale, job.cost.seed_parts)
    return dataclasses.replace(job, profile=profile, compute=compute, cost=cost)
