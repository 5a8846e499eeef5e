"""A job on its profile without the ``noise`` block: for tests of the time model's exact arithmetic."""

from __future__ import annotations

import dataclasses

from distrepro.job.resolve import Job
from distrepro.timing.timemodel import CommCostModel, ComputeModel


def quiet_job(job: Job) -> Job:
    """``job`` with clock noise removed (compute, link and each GPU's own speed), every seed and speed unchanged."""
    profile = job.profile.model_copy(update={"noise": None})
    c = job.compute
    compute = ComputeModel(  # the loop's host syncs as the job's (a method syncing per bucket keeps paying per bucket)
        profile,
        c.workload_name,
        c.flops_per_sample,
        c.seed_parts,
        c.host_syncs,
        hardware_seed_parts=c.hardware_seed_parts,
    )
    cost = CommCostModel(profile, job.cost.bytes_scale, job.cost.seed_parts)
    return dataclasses.replace(job, profile=profile, compute=compute, cost=cost)
