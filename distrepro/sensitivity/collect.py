"""Which claims are about time, which runs they read, and what those runs' times depend on.

A claim is a *timing* claim when its statistic is computed from emulated time: a speedup on the
emulated clock, a convergence claim counted in emulated seconds, or any other kind on
``final/emulated_s``, ``final/useful_flops_per_emulated_s`` (useful FLOPs per emulated second) or
``time_to_target_s``. Accuracy claims do not depend on the hardware and are not swept.

For each timing claim the runs the verdict engine would pick (per arm, on the claim's profile and
scale, the newest finished run per seed) are rebuilt as jobs. Their variables are the ranged
figures of their profiles plus the paper's method assumptions for their arm; an assumption's
central value is the arm's configured parameter, which must lie inside its range.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from distrepro import metrics as M
from distrepro.claims.schema import PaperSpec
from distrepro.claims.verdicts import latest_per_seed, select_arm
from distrepro.config.run_config import validate_config
from distrepro.errors import ConfigError, DistreproError
from distrepro.job.resolve import Job, build_job
from distrepro.orchestration.progress import NoPhases, Phases, counted
from distrepro.safe_yaml import load_yaml
from distrepro.sensitivity.probe import NotAnalysable
from distrepro.sensitivity.retime import RetimedRun, memo_key, reseed
from distrepro.sensitivity.space import Variable

TIME_METRICS = frozenset(
    {M.FINAL_EMULATED_S, "emulated_s", M.FINAL_USEFUL_FLOPS, "useful_flops_per_emulated_s", M.TIME_TO_TARGET_S}
)


def is_timing(claim: Any) -> bool:
    """True when the claim's statistic is computed from emulated time (see the module docstring)."""
    if claim.kind == "speedup":
        return claim.clock == "emulated"
    if claim.kind == "convergence":
        return claim.unit == "emulated_s"
    return getattr(claim, "metric", None) in TIME_METRICS


def claim_arms(claim: Any) -> list[str]:
    names = list(claim.arms) if claim.kind == "ordering" else [claim.arm]
    base = getattr(claim, "baseline", None)
    return [*names, base] if base else names


#: (run id, seed) -> the job that run ran
JobSource = Callable[[str, int], Job]


@dataclass
class Collected:
    """Runs to re-time, the variables of the paper's assumptions, and claims that cannot be swept."""

    runs: list[RetimedRun]
    assumption_vars: list[Variable]
    timing_claims: list[Any]
    skipped: dict[str, str] = field(default_factory=dict)  # claim id -> why it is not swept
    claim_runs: dict[str, set[str]] = field(default_factory=dict)  # claim id -> run ids it reads

    def drop(self, unusable: dict[str, str]) -> None:
        """Leave out the runs in ``unusable`` (run id -> why): each claim reading one is not swept (the reason says
        which run and why), and runs no remaining claim reads are dropped too."""
        for claim in list(self.timing_claims):
            bad = sorted(self.claim_runs.get(claim.id, set()) & set(unusable))
            if bad:
                self.skipped[claim.id] = unusable[bad[0]]
                self.timing_claims.remove(claim)
        read = {r for c in self.timing_claims for r in self.claim_runs[c.id]}
        self.runs = [r for r in self.runs if r.run_id in read]


def _assumption_vars(spec: PaperSpec, source: Path | None, runs: list[RetimedRun]) -> list[Variable]:
    out = []
    for i, a in enumerate(spec.setup.sensitivity.assumptions):
        where = f"setup.sensitivity.assumptions[{i}]"
        if a.arm not in spec.setup.arms:
            raise ConfigError(source, f"{where}.arm", f"unknown arm {a.arm!r}; known: {', '.join(spec.setup.arms)}")
        mine = [r for r in runs if r.arm == a.arm and (a.at_scale is None or r.job.config.scale == a.at_scale)]
        if not mine:
            continue
        fields = type(mine[0].job.params).model_fields
        if a.param not in fields:
            raise ConfigError(source, f"{where}.param", f"arm {a.arm!r} has no method parameter {a.param!r}")
        central = getattr(mine[0].job.params, a.param)
        if not isinstance(central, int | float) or isinstance(central, bool) or not a.contains(float(central)):
            raise ConfigError(
                source,
                f"{where}.param",
                f"{a.arm}.{a.param} = {central!r} in the arm's config is not a number inside [{a.low:g}, {a.high:g}]",
            )
        for run in mine:
            run.assumptions[a.variable] = a.param
        place = f"{source.name if source else 'paper.yaml'}: {where} ({a.arm}.{a.param})"
        out.append(Variable(a.variable, a, float(central), "assumption", (place,), a.param))
    return out


def collect(
    spec: PaperSpec,
    runs: pd.DataFrame,
    job_for: JobSource,
    arm_of: Callable[[str], str],
    source: Path | None = None,
    progress: Phases | None = None,
) -> Collected:
    """The runs of every timing claim of ``spec`` found in ``runs``, rebuilt by ``job_for`` (a phase of
    ``progress``: the first run of each config builds its dataset and model)."""
    shown = progress if progress is not None else NoPhases()
    claims = [c for c in spec.claims if is_timing(c)]
    picked: dict[str, int] = {}
    skipped: dict[str, str] = {}
    claim_runs: dict[str, set[str]] = {}
    chosen: dict[tuple[str, str | None, str | None], pd.DataFrame] = {}  # claims share arms: each picked once
    for claim in claims:
        rows = []
        for name in claim_arms(claim):
            pick = (name, claim.profile, claim.scale)
            if pick not in chosen:
                chosen[pick] = latest_per_seed(select_arm(runs, spec, name, claim.profile, claim.scale))[0]
            rows.append(chosen[pick])
        if any(r.empty for r in rows):
            skipped[claim.id] = "an arm has no finished run to re-time"
            continue
        for frame in rows:
            picked.update(zip(frame["run_id"], frame["seed"].astype(int), strict=True))
        claim_runs[claim.id] = {r for frame in rows for r in frame["run_id"]}
    by_id = runs.set_index("run_id")
    retimed = []
    unusable: dict[str, str] = {}
    shown.phase(f"rebuilding {counted(len(picked), 'run')}", len(picked))
    for run_id, seed in picked.items():
        shown.advance()
        try:
            job = job_for(run_id, seed)
            if not job.method.cls.synchronous:
                raise NotAnalysable(f"method {job.method.name} is asynchronous")
        except DistreproError as exc:  # a claim on this run is reported as not swept, the others still are
            unusable[run_id] = f"run {run_id} cannot be re-timed: {exc}"
            continue
        key = memo_key(job, seed)
        step = by_id.at[run_id, M.STEP_TO_TARGET] if M.STEP_TO_TARGET in by_id else math.nan
        reached = by_id.at[run_id, M.TARGET_REACHED] if M.TARGET_REACHED in by_id else math.nan
        logged = float(by_id.at[run_id, M.FINAL_EMULATED_S])
        retimed.append(
            RetimedRun(
                run_id, arm_of(run_id), job, key, logged, int(step) if reached == 1 and not pd.isna(step) else None
            )
        )
    for cid, ids in claim_runs.items():
        bad = sorted(ids & set(unusable))
        if bad and cid not in skipped:
            skipped[cid] = unusable[bad[0]]
    swept = [c for c in claims if c.id not in skipped]
    retimed = [r for r in retimed if any(r.run_id in claim_runs[c.id] for c in swept)]
    return Collected(retimed, _assumption_vars(spec, source, retimed), swept, skipped, claim_runs)


class MlflowJobs:
    """Rebuild a run's job from its logged ``config.resolved.yaml`` (one build per config, then
    :func:`~distrepro.sensitivity.retime.reseed` for the other seeds; datasets shared)."""

    def __init__(self, artifact_text: Callable[[str, str], str | None]) -> None:
        self._text = artifact_text
        self._jobs: dict[str, Job] = {}
        self._bundles: dict[str, Any] = {}
        self._seen: dict[tuple[str, int], str] = {}  # (text less its seed line, where that line was) -> job key

    def __call__(self, run_id: str, seed: int) -> Job:
        text = self._text(run_id, "config.resolved.yaml")
        where = f"run {run_id}: config.resolved.yaml"
        if not text:
            raise ConfigError(where, None, "not logged: the run cannot be rebuilt for the sensitivity sweep")
        seen, key = _seen_key(text), None
        if seen is not None:
            key = self._seen.get(seen)
        if key is None:
            data = load_yaml(text, where) or {}
            logged_seed = data.pop("seed", None)
            key = yaml.safe_dump(data, sort_keys=True)
            if key not in self._jobs:
                cfg = validate_config(data, source=where)
                dkey = cfg.dataset.model_dump_json()
                self._jobs[key] = build_job(cfg, seed, where, self._bundles.get(dkey))
                self._bundles.setdefault(dkey, self._jobs[key].bundle)
            if seen is not None and type(logged_seed) is int and text[seen[1] :].startswith(f"seed: {logged_seed}\n"):
                self._seen[seen] = key  # the line is the top-level seed: another seed's text is this config
        base = self._jobs[key]
        return base if base.seed == seed else reseed(base, seed)


#: a top-level ``seed:`` line, as ``yaml.safe_dump`` writes a config's seed
_SEED_LINE = re.compile(r"^seed: \d+\n", re.MULTILINE)


def _seen_key(text: str) -> tuple[str, int] | None:
    """The text without its one top-level ``seed:`` line, and where that line was (None without exactly one).

    Why: a report rebuilds every run of a config from its logged text, which the runs' texts repeat but for the
    seed line; parsing each (a pure-Python YAML parse) and dumping it again for the key cost more than the rest of
    rebuilding the runs. Two texts equal but for the digits of that line, at the same place, hold the same data but
    for one scalar, and :meth:`MlflowJobs.__call__` takes the shortcut only after a parse showed that scalar to be the
    top-level ``seed`` (the one key the job key leaves out)."""
    found = list(_SEED_LINE.finditer(text))
    if len(found) != 1:
        return None
    start, end = found[0].span()
    return text[:start] + text[end:], start


def arms_by_run(runs: pd.DataFrame, spec: PaperSpec, arms: Sequence[str]) -> dict[str, str]:
    """Run id -> the most specific declared arm it belongs to (as the report labels runs)."""
    out: dict[str, tuple[int, str]] = {}
    for name in arms:
        arm = spec.setup.arms[name]
        rank = len(arm.params) + (arm.campaign is not None)
        for run_id in select_arm(runs, spec, name, None, None)["run_id"]:
            if rank >= out.get(run_id, (-1, ""))[0]:
                out[run_id] = (rank, name)
    return {r: name for r, (_, name) in out.items()}
