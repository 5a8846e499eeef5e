"""The runs of a report, re-timed for one setting of the uncertain figures.

Each finished run is rebuilt as the :class:`~distrepro.job.resolve.Job` it ran (its logged
``config.resolved.yaml`` and seed; the profile as the repository declares it now), then for a
setting its profile and method parameters are changed and :func:`~distrepro.sensitivity.analytic.simulate`
gives its emulated time. :meth:`Retimer.tables` writes those times into copies of the run and
curve tables, in the columns the verdict engine reads (``final/emulated_s``,
``final/useful_flops_per_emulated_s``, ``time_to_target_s``, the curves' ``time/emulated_s``), so a
claim is judged at a setting by the same code that judged it at the central values.

Simulations are memoised on what a run's time can depend on (:func:`memo_key`): its config, its seed only when its
profile has noise for it (jitter, stragglers, a ``noise:`` block, its workload's batch spread), and the values of the
variables of its own profile and arm. A one-at-a-time scan of the 10 GbE link therefore re-simulates only the runs on a
multi-machine profile.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from distrepro import metrics as M
from distrepro.api.method import MethodParams
from distrepro.hardware.profiles import HardwareProfile
from distrepro.job.resolve import Job
from distrepro.sensitivity.analytic import Timing, simulate
from distrepro.sensitivity.lane_contention import Split
from distrepro.sensitivity.lanes import simulate_lanes
from distrepro.sensitivity.probe import NotAnalysable, Prober
from distrepro.sensitivity.space import apply_to_profile, profile_variables
from distrepro.timing.timemodel import CommCostModel, ComputeModel

#: fewer settings than this are replayed one at a time (:meth:`Retimer.timing`), not as lanes
MIN_LANES = 8


class _CachedNoise(ComputeModel):
    """``ComputeModel`` whose jitter/straggler factors come from a table shared across settings: they
    depend on the run's seeds and the profile's noise declaration, which no sweep variable touches."""

    def __init__(self, base: ComputeModel, profile: HardwareProfile, table: dict[tuple[int, int], float]) -> None:
        super().__init__(
            profile,
            base.workload_name,
            base.flops_per_sample,
            base.seed_parts,
            base.host_syncs,
            hardware_seed_parts=base.hardware_seed_parts,
        )
        self._table = table

    @property
    def table(self) -> dict[tuple[int, int], float]:
        """The run's noise factors, shared by its settings (:mod:`distrepro.sensitivity.lanes` draws once per table)."""
        return self._table

    def noise_factor(self, rank: int, step_index: int) -> float:
        key = (rank, step_index)
        value = self._table.get(key)
        if value is None:
            value = self._table[key] = super().noise_factor(rank, step_index)
        return value


def has_noise(profile: HardwareProfile, workload: str | None = None) -> bool:
    """Whether the run's seed enters its clock: per-device jitter, a workload's batch spread
    (``step_jitter_sigma`` of ``workload``, the one the run charges; of any workload when none is named) or
    stragglers, or the profile's cluster-wide ``noise`` block (``compute_cv`` on devices without their own jitter,
    ``link_cv``, ``gpu_cv``)."""
    groups = [g for node in profile.nodes for g in node.devices]

    def spread(g: Any) -> bool:
        return g.step_jitter_sigma.get(workload, 0.0) > 0 if workload is not None else any(g.step_jitter_sigma.values())

    jittered = [(g.jitter.kind != "none" and g.jitter.sigma > 0) or spread(g) for g in groups]
    if any(jittered) or any(g.straggler.probability > 0 for g in groups):
        return True
    noise = profile.noise
    return noise is not None and (noise.compute_cv > 0 or noise.link_cv > 0 or noise.gpu_cv > 0)


def memo_key(job: Job, seed: int) -> tuple[str, int | None]:
    """What a run's re-timed clock depends on besides the setting: its config without the seeds, and its seed only
    where the profile's noise makes the clock depend on it for the workload the run charges (:func:`has_noise`)."""
    noisy = has_noise(job.profile, job.compute.workload_name)
    return job.config.model_dump_json(exclude={"seeds"}), seed if noisy else None


@dataclass
class RetimedRun:
    """One run to re-time: its central job, what its time depends on, and what it logged."""

    run_id: str
    arm: str
    job: Job
    key: tuple[Any, ...]  # memo key: config digest and (for noisy profiles) the seed
    logged_emulated_s: float
    step_to_target: int | None
    profile_vars: tuple[str, ...] = ()
    assumptions: dict[str, str] = field(default_factory=dict)  # variable name -> method param
    prober: Prober | None = None
    noise: dict[tuple[int, int], float] = field(default_factory=dict)

    @property
    def variables(self) -> tuple[str, ...]:
        return (*self.profile_vars, *self.assumptions)


def reseed(job: Job, seed: int) -> Job:
    """``job`` for another seed index without rebuilding its dataset and model: the seed enters only the
    seed parts (hence the clock's noise). For jobs made by ``build_job``, whose seed parts end with the seed."""
    if not job.seed_parts or job.seed_parts[-1] != job.seed:
        raise ValueError("reseed needs a job whose seed parts end with its seed (as build_job makes them)")
    parts = (*job.seed_parts[:-1], seed)
    method_parts = (*job.method_seed_parts[:-1], seed) if job.method_seed_parts else parts
    c = job.compute
    compute = ComputeModel(
        job.profile,
        c.workload_name,
        c.flops_per_sample,
        (*method_parts, "compute"),
        c.host_syncs,
        hardware_seed_parts=(*parts, "hardware"),
    )
    cost = CommCostModel(job.profile, seed_parts=(*method_parts, "link"))
    return dataclasses.replace(
        job, seed=seed, seed_parts=parts, method_seed_parts=method_parts, compute=compute, cost=cost
    )


def _params(job: Job, updates: Mapping[str, float]) -> MethodParams:
    if not updates:
        return job.params
    return job.params.__class__.model_validate({**job.params.model_dump(), **updates})


class Retimer:
    """Timings of every run for any setting (``{variable: value}``), memoised."""

    def __init__(self, runs: Sequence[RetimedRun]) -> None:
        self.runs = list(runs)
        self._probers: dict[tuple[Any, ...], Prober] = {}
        self._noise: dict[tuple[Any, ...], dict[tuple[int, int], float]] = {}
        self._profiles: dict[tuple[Any, ...], HardwareProfile] = {}
        self._memo: dict[tuple[Any, ...], Timing] = {}
        #: jobs :meth:`prefetch` built that lanes did not replay: :meth:`timing` replays these very jobs (by memo key)
        self._built: dict[tuple[Any, ...], Job] = {}
        for run in self.runs:
            run.profile_vars = tuple(sorted(profile_variables([run.job.profile])))
            run.prober = self._probers.setdefault(run.key[:1], Prober(run.job))
            run.noise = self._noise.setdefault(run.key, {})
        self.simulations = 0

    def _profile(self, base: HardwareProfile, names: tuple[str, ...], values: tuple[float, ...]) -> HardwareProfile:
        key = (base.name, base.variant, names, values)
        if key not in self._profiles:
            self._profiles[key] = apply_to_profile(base, dict(zip(names, values, strict=True)))
        return self._profiles[key]

    def _at(self, run: RetimedRun, setting: Mapping[str, float]) -> tuple[tuple[Any, ...], Job | None]:
        """The memo key of ``run`` at ``setting``, and the job to simulate there (None when memoised)."""
        names = tuple(n for n in run.profile_vars if n in setting)
        pvals = tuple(float(setting[n]) for n in names)
        avals = tuple((p, float(setting[v])) for v, p in sorted(run.assumptions.items()) if v in setting)
        memo = (run.key, names, pvals, avals)
        if memo in self._memo:
            return memo, None
        built = self._built.pop(memo, None)
        if built is not None:  # a setting prefetch could not replay in lanes: its job is built already
            return memo, built
        job = run.job
        profile = self._profile(job.profile, names, pvals) if names else job.profile
        job = dataclasses.replace(
            job,
            profile=profile,
            compute=_CachedNoise(job.compute, profile, run.noise),
            cost=CommCostModel(profile, seed_parts=(*job.method_seed_parts, "link")),
            params=_params(job, dict(avals)),
        )
        return memo, job

    def timing(self, run: RetimedRun, setting: Mapping[str, float]) -> Timing:
        memo, job = self._at(run, setting)
        if job is not None:
            assert run.prober is not None
            self._memo[memo] = simulate(job, run.prober)
            self.simulations += 1
        return self._memo[memo]

    def prefetch(self, settings: Sequence[Mapping[str, float]]) -> None:
        """Simulate every run at each of ``settings`` ahead of :meth:`timing`, the settings of the runs of one config
        and method parameters together (:func:`~distrepro.sensitivity.lanes.simulate_lanes`: one pass for all, bit
        for bit what :meth:`timing` gives). Lanes that cannot go together are tried per run, then left to
        :meth:`timing`, which replays them one at a time and raises what the replay raises."""
        groups: dict[tuple[Any, ...], dict[tuple[Any, ...], tuple[RetimedRun, Job]]] = {}
        for run in self.runs:
            for setting in settings:
                memo, job = self._at(run, setting)
                if job is not None:
                    groups.setdefault((run.key[:1], memo[3]), {}).setdefault(memo, (run, job))
        for lanes in groups.values():
            if not self._lanes(lanes):
                by_run: dict[tuple[Any, ...], dict[tuple[Any, ...], tuple[RetimedRun, Job]]] = {}
                for memo, item in lanes.items():
                    by_run.setdefault(memo[0], {})[memo] = item
                for mine in by_run.values() if len(by_run) > 1 else ():
                    self._lanes(mine)
        for lanes in groups.values():  # left to timing(), which replays them one at a time
            self._built.update((memo, job) for memo, (_, job) in lanes.items() if memo not in self._memo)

    def _lanes(self, lanes: Mapping[tuple[Any, ...], tuple[RetimedRun, Job]]) -> bool:
        items = list(lanes.items())
        if len(items) < MIN_LANES:  # a NumPy operation on a few lanes costs more than the floats' one by one
            return False
        prober = items[0][1][0].prober
        assert prober is not None
        try:
            timings = simulate_lanes([job for _, (_, job) in items], prober)
        except Split as split:  # allocations of other shapes from the start: each shape's lanes together
            for group in split.groups:
                self._lanes(dict(items[i] for i in group))
            return True
        except Exception:  # Diverged, or what the scalar replay raises: each setting is then replayed alone
            return False
        for (memo, _), t in zip(items, timings, strict=True):
            self._memo[memo] = t
        self.simulations += len(items)
        return True

    def timings(self, setting: Mapping[str, float]) -> dict[str, Timing]:
        return {run.run_id: self.timing(run, setting) for run in self.runs}

    def tables(
        self, runs: pd.DataFrame, curves: pd.DataFrame | None, setting: Mapping[str, float]
    ) -> tuple[pd.DataFrame, pd.DataFrame | None]:
        """Copies of ``runs`` and ``curves`` with the re-timed runs' time columns replaced.

        Called once per setting (32 settings of 90 runs for Chao's report): the new values are gathered per run and
        written one column at a time where every column written is float64 and the run table's labels are unique
        (the same float64 values as a cell-by-cell write), else cell by cell (:meth:`_tables_by_cell`), which
        leaves the dtypes to pandas as before."""
        out = runs.copy()
        for col in (M.FINAL_EMULATED_S, M.FINAL_SAMPLES, M.FINAL_USEFUL_FLOPS):
            if col not in out:
                out[col] = math.nan
        curves_out = curves.copy() if curves is not None else None
        timed = M.TIME_TO_TARGET_S in out
        cv = curves_out if curves_out is not None and M.EMULATED_S in curves_out and len(curves_out) else None
        cols = [M.FINAL_EMULATED_S, M.FINAL_SAMPLES, M.FINAL_USEFUL_FLOPS] + [M.TIME_TO_TARGET_S] * timed
        floats = out.index.is_unique and all(out[c].dtype == "float64" for c in cols)
        if not floats or (cv is not None and cv[M.EMULATED_S].dtype != "float64"):
            return self._tables_by_cell(out, curves_out, setting)
        where = {r: i for i, r in enumerate(out["run_id"])}
        values = {c: out[c].to_numpy(dtype="float64", copy=True) for c in cols}
        groups = cv.groupby("run_id", sort=False).indices if cv is not None else {}
        steps = cv["step"].to_numpy() if cv is not None else None
        emulated = cv[M.EMULATED_S].to_numpy(dtype="float64", copy=True) if cv is not None else None
        for run in self.runs:
            t = self.timing(run, setting)
            i = where[run.run_id]
            values[M.FINAL_EMULATED_S][i] = t.emulated_s
            values[M.FINAL_SAMPLES][i] = float(t.samples)
            values[M.FINAL_USEFUL_FLOPS][i] = t.samples * run.job.compute.flops_per_sample / t.emulated_s
            base = self.timing(run, {})  # the run as it ran: its evaluation steps in samples processed
            if run.step_to_target is not None and timed:
                values[M.TIME_TO_TARGET_S][i] = t.at_samples(base.samples_at(run.step_to_target))
            rows = groups.get(run.run_id)
            if rows is not None and len(rows):
                assert steps is not None and emulated is not None
                emulated[rows] = [t.at_samples(base.samples_at(int(s))) for s in steps[rows]]
        for c, v in values.items():
            out[c] = pd.Series(v, index=out.index, name=c)
        if cv is not None and emulated is not None:
            cv[M.EMULATED_S] = pd.Series(emulated, index=cv.index, name=M.EMULATED_S)
        return out, curves_out

    def _tables_by_cell(
        self, out: pd.DataFrame, curves_out: pd.DataFrame | None, setting: Mapping[str, float]
    ) -> tuple[pd.DataFrame, pd.DataFrame | None]:
        """:meth:`tables` cell by cell (``out``, ``curves_out``: the copies to write into)."""
        index = {r: i for i, r in zip(out.index, out["run_id"], strict=True)}
        for run in self.runs:
            t = self.timing(run, setting)
            i = index[run.run_id]
            out.at[i, M.FINAL_EMULATED_S] = t.emulated_s
            out.at[i, M.FINAL_SAMPLES] = float(t.samples)
            flops = run.job.compute.flops_per_sample
            out.at[i, M.FINAL_USEFUL_FLOPS] = t.samples * flops / t.emulated_s
            base = self.timing(run, {})  # the run as it ran: its evaluation steps in samples processed
            if run.step_to_target is not None and M.TIME_TO_TARGET_S in out:
                out.at[i, M.TIME_TO_TARGET_S] = t.at_samples(base.samples_at(run.step_to_target))
            if curves_out is not None and M.EMULATED_S in curves_out and len(curves_out):
                mask = curves_out["run_id"] == run.run_id
                steps = curves_out.loc[mask, "step"]
                curves_out.loc[mask, M.EMULATED_S] = [t.at_samples(base.samples_at(int(s))) for s in steps]
        return out, curves_out


def check_central(
    retimer: Retimer,
    central: Mapping[str, float],
    done: Callable[[], None] | None = None,
    unusable: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Per run: logged emulated seconds vs the analytical ones at the central values (``done`` after each run:
    the first simulation of every run, the slow part before the sweep's settings, shown as progress).

    A run whose replay is :class:`NotAnalysable` (e.g. non-blocking collectives of two groups in flight at once,
    Decent-DP's overlapped AER rounds) raises, unless ``unusable`` is given: then it is recorded there (run id ->
    why) and left out of the rows, so the claims on the other runs can still be swept."""
    rows = []
    for run in retimer.runs:
        try:
            t = retimer.timing(run, central)
        except NotAnalysable as exc:
            if unusable is None:
                raise
            unusable[run.run_id] = f"run {run.run_id} ({run.arm}) cannot be re-timed analytically: {exc}"
            continue
        finally:
            if done is not None:
                done()
        err = abs(t.emulated_s - run.logged_emulated_s) / run.logged_emulated_s if run.logged_emulated_s else math.nan
        rows.append(
            {
                "run_id": run.run_id,
                "arm": run.arm,
                "seed": run.job.seed,
                "logged_s": run.logged_emulated_s,
                "analytic_s": t.emulated_s,
                "rel_error": err,
            }
        )
    return rows
