"""``--sensitivity``: sweep a paper's timing claims over the plausible hardware, from its tracked runs.

Input is what a report reads (the paper's claims and a :class:`~distrepro.claims.runs.RunSet`); each run
is rebuilt from its logged config, so nothing is trained. The sweep's size and the method
assumptions come from ``setup.sensitivity`` in ``paper.yaml``; the hardware ranges from the
profiles. The result says, per timing claim, in what share of plausible settings it PASSes, which
figure decides it and where the verdict flips, and how well the analytical times matched the
runs at the central values (a large mismatch would make every figure of the sweep suspect, so the
report shows it first).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from distrepro.claims.papers import PaperInfo
from distrepro.orchestration.progress import NoPhases, Phases, counted
from distrepro.sensitivity.collect import JobSource, MlflowJobs, arms_by_run, collect
from distrepro.sensitivity.retime import Retimer, check_central
from distrepro.sensitivity.space import Space, build_space, profile_variables
from distrepro.sensitivity.sweep import Judge, SensitivityResult, run_sweep, sweep_seed


def sensitivity(
    info: PaperInfo,
    rs: Any,
    samples: int | None = None,
    job_for: JobSource | None = None,
    points: int = 9,
    progress: Phases | None = None,
) -> SensitivityResult | None:
    """Sweep ``info``'s timing claims over the runs of ``rs`` (a RunSet: ``runs``, ``curves``,
    ``artifact_text``); ``None`` for a paper without claims. ``samples`` overrides the paper's size.

    ``progress`` (e.g. :class:`distrepro.orchestration.progress.PhaseProgress`) is told each phase and closed at
    the end: a
    paper's sweep takes minutes (about 8 for ``chao``), with nothing else on the screen meanwhile."""
    spec = info.spec
    if spec is None or not spec.claims:
        return None
    shown = progress if progress is not None else NoPhases()
    t0 = time.perf_counter()
    arms = arms_by_run(rs.runs, spec, list(spec.setup.arms))
    source = job_for or MlflowJobs(rs.artifact_text)
    found = collect(spec, rs.runs, source, lambda run_id: arms.get(run_id, ""), info.path, shown)
    n = int(samples or spec.setup.sensitivity.samples)
    seed = sweep_seed(info.id, spec.setup.sensitivity.seed, n)
    if not found.runs:
        shown.close()
        return SensitivityResult(info.id, n, seed, Space(), np.zeros((n, 0)), [], found.skipped, [], {})
    shown.phase(f"re-timing {counted(len(found.runs), 'run')} at central values", len(found.runs))
    retimer = Retimer(found.runs)
    profiles = {(r.job.profile.name, r.job.profile.variant): r.job.profile for r in found.runs}
    space = build_space(profile_variables(profiles.values()), found.assumption_vars)
    unusable: dict[str, str] = {}
    validation = check_central(retimer, space.central(), shown.advance, unusable)
    if unusable:  # their claims are listed as not swept; the sweep goes on over the others' runs
        found.drop(unusable)
        keep = {r.run_id for r in found.runs}
        retimer.runs = [r for r in retimer.runs if r.run_id in keep]
        validation = [row for row in validation if row["run_id"] in keep]
        profiles = {(r.job.profile.name, r.job.profile.variant): r.job.profile for r in found.runs}
        names = {n for r in found.runs for n in r.variables}
        space = Space([v for v in space.variables if v.name in names])
        if not found.runs:
            shown.close()
            return SensitivityResult(info.id, n, seed, space, np.zeros((n, 0)), [], found.skipped, [], {})
    judge = Judge(spec, rs.runs, rs.curves, info.id, retimer, found.timing_claims, found.claim_runs)
    claims, design = run_sweep(judge, space, n, seed, points, progress=shown)
    shown.close()
    unranged = {p.name: p.unranged_estimates() for p in profiles.values() if p.unranged_estimates()}
    result = SensitivityResult(info.id, n, seed, space, design, claims, found.skipped, validation, unranged)
    result.simulations = retimer.simulations
    result.wall_s = time.perf_counter() - t0
    return result
