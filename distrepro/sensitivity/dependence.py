"""Does a timing verdict hold on every plausible cluster, or does it depend on an estimated figure?

Every report asks this of its timing claims (those decided by emulated time,
:func:`distrepro.sensitivity.collect.is_timing`), not only a report built with ``--sensitivity``: a verdict
that PASSes in more than 5 % and fewer than 95 % of the plausible hardware settings is evidence about an
estimate (a link's bandwidth, a sync period), not about the paper, so the headline tally counts it apart
(:func:`distrepro.claims.tally.mark_dependence`). Claims merged into one unit (``same_as``/``counts_with``) are
judged as one in every setting, from each claim's verdict there (kept per setting for that), so the unit's share
decides (:func:`distrepro.claims.tally.unit_shares`).

This is the cheap part of the full sweep (:mod:`distrepro.sensitivity.sweep`): the same runs rebuilt and
re-timed analytically, the same central-value check, the same Latin hypercube (same seed for the same
size), but no one-at-a-time scans, flip points, heat maps or figures. The figure a verdict depends on is the
variable whose values rank-correlate most with the claim's statistic over the hypercube (the full sweep
names the widest tornado bar instead; the two agree when one figure dominates). Its result is cached in the
report folder under a key of everything it reads: the claims file, the hardware-profile files, the
package's source, the method and dataset plugins' source (the replay runs each method's ``setup`` and
``train_step`` against a recording context, and rebuilds each run's data), the runs (id, status, logged emulated
time) and the number of settings, so a second
``distrepro report`` of the same store costs nothing. Claims the replay cannot time (an asynchronous
method, overlapped collectives of two groups, a run without its logged config) stay unmarked, each with the
reason.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import distrepro
from distrepro.claims.papers import PaperInfo
from distrepro.orchestration.progress import NoPhases, Phases, counted
from distrepro.plugins.roots import roots
from distrepro.safe_write import write_text
from distrepro.sensitivity.collect import JobSource, MlflowJobs, arms_by_run, collect
from distrepro.sensitivity.retime import Retimer, check_central
from distrepro.sensitivity.space import Space, build_space, latin_hypercube, profile_variables
from distrepro.sensitivity.sweep import Judge, sweep_seed

#: Latin-hypercube settings of the default check. 32 strata per figure: a claim that flips in 2 of them
#: (6 %) is marked, and one that PASSes in 10 % of the plausible settings goes unseen with probability 0.9³² = 3 %;
#: the hypercube costs an eighth of the full sweep's (256 settings by default).
DEFAULT_SAMPLES = 32
#: the cache file in the report folder (also what a reader opens for the per-claim shares)
CACHE_FILE = "timing_dependence.json"
_FORMAT = 2


@dataclass
class ClaimShare:
    """One swept claim: its verdict counts over the settings and the figure that moves it most."""

    claim_id: str
    share: float  # PASS share over the hypercube
    counts: dict[str, int]
    decisive: str  # the variable most rank-correlated with the statistic ('' when none moves it)
    #: its verdict at each setting, in the hypercube's order: a merged unit is judged setting by setting from these
    verdicts: list[str] = field(default_factory=list)


@dataclass
class Dependence:
    """What the default check found for a paper: one :class:`ClaimShare` per swept claim, the reasons of
    the others, and what it cost."""

    samples: int
    seed: int
    variables: list[str]
    claims: list[ClaimShare]
    skipped: dict[str, str]
    max_validation_error: float = math.nan  # analytical vs logged emulated time at central values
    cpu_s: float = 0.0
    wall_s: float = 0.0
    key: str = ""
    cached: bool = False
    error: str = ""  # why the check could not run at all (the report says so; verdicts stay unmarked)
    extra: dict[str, Any] = field(default_factory=dict)

    def shares(self) -> dict[str, tuple[float, str]]:
        """claim id -> (PASS share, the decisive figure): what :func:`~distrepro.claims.tally.mark_dependence`
        reads."""
        return {c.claim_id: (c.share, c.decisive) for c in self.claims}

    def settings(self) -> dict[str, list[str]]:
        """claim id -> its verdict at each setting (the same settings, in the same order, for every claim): what
        :func:`~distrepro.claims.tally.unit_shares` combines for a merged unit."""
        return {c.claim_id: list(c.verdicts) for c in self.claims}

    def to_json(self) -> str:
        data = asdict(self)
        data.pop("cached")
        data["format"] = _FORMAT
        if not math.isfinite(self.max_validation_error):
            data["max_validation_error"] = None
        return json.dumps(data, indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Dependence | None:
        """The cached result, or None when the file is unreadable or of another format (recomputed then)."""
        try:
            data = json.loads(text)
            if data.pop("format", None) != _FORMAT:
                return None
            data["claims"] = [ClaimShare(**c) for c in data["claims"]]
            if data.get("max_validation_error") is None:
                data["max_validation_error"] = math.nan
            return cls(**data, cached=True)
        except (ValueError, TypeError, KeyError):
            return None


def _digest_files(h: Any, files: list[Path], base: Path | None = None) -> None:
    for path in sorted(files):
        h.update(str(path.relative_to(base) if base else path).encode())
        h.update(hashlib.sha256(path.read_bytes()).digest())


def cache_key(info: PaperInfo, runs: Any, samples: int) -> str:
    """A digest of everything the check reads: the claims file, every root's hardware profiles (ranges,
    workloads, layer tables) and method and dataset plugins (the replay probes each method's steps: a plugin edited
    after the runs re-times them differently), the package's source (the replay and the verdict rules), the runs and
    ``samples``."""
    h = hashlib.sha256(f"{_FORMAT}|{distrepro.__version__}|{info.id}|{samples}".encode())
    if info.path is not None and Path(info.path).is_file():
        h.update(Path(info.path).read_bytes())
    for root in roots():
        folder = root / "hardware_profiles"
        if folder.is_dir():
            _digest_files(h, [p for p in folder.rglob("*") if p.is_file()], root)
        for plugins in (root / "methods", root / "datasets"):
            if plugins.is_dir():
                _digest_files(h, list(plugins.rglob("*.py")), root)
    package = Path(distrepro.__file__).parent
    _digest_files(h, list(package.rglob("*.py")), package)
    cols = [c for c in ("run_id", "status", "final/emulated_s") if c in runs.columns]
    if cols:
        rows = runs[cols].astype(str).sort_values(cols[0]).to_csv(index=False)
        h.update(rows.encode())
    return h.hexdigest()


def _decisive(design: np.ndarray, space: Space, relevant: list[str], stats: np.ndarray) -> str:
    """The relevant variable whose hypercube values rank-correlate most (in absolute value) with ``stats``."""
    from distrepro.sensitivity.sweep import _rank_corr

    best, name = 0.0, ""
    for j, var in enumerate(space.variables):
        if var.name not in relevant:
            continue
        rho = abs(_rank_corr(design[:, j], stats))
        if rho > best:
            best, name = rho, var.name
    return name


def compute(
    info: PaperInfo, rs: Any, samples: int, job_for: JobSource | None = None, progress: Phases | None = None
) -> Dependence:
    """Re-time the runs of ``info``'s timing claims over ``samples`` Latin-hypercube settings (no cache);
    ``progress`` is told of each phase (rebuilding the runs, the settings) and of each unit done."""
    spec = info.spec
    assert spec is not None
    t0, c0 = time.perf_counter(), time.process_time()
    seed = sweep_seed(info.id, spec.setup.sensitivity.seed, samples)
    arms = arms_by_run(rs.runs, spec, list(spec.setup.arms))
    shown = progress if progress is not None else NoPhases()
    jobs = job_for or MlflowJobs(rs.artifact_text)
    found = collect(spec, rs.runs, jobs, lambda r: arms.get(r, ""), info.path, shown)
    out = Dependence(samples, seed, [], [], dict(found.skipped))
    if found.runs:
        retimer = Retimer(found.runs)
        profiles = {(r.job.profile.name, r.job.profile.variant): r.job.profile for r in found.runs}
        space = build_space(profile_variables(profiles.values()), found.assumption_vars)
        unusable: dict[str, str] = {}
        shown.phase(f"re-timing {counted(len(found.runs), 'run')} at the central values", 0)
        retimer.prefetch([space.central(), {}])  # each run's seeds in one pass (the tables read {}: the run as it ran)
        validation = check_central(retimer, space.central(), None, unusable)
        if unusable:
            found.drop(unusable)
            keep = {r.run_id for r in found.runs}
            retimer.runs = [r for r in retimer.runs if r.run_id in keep]
            validation = [row for row in validation if row["run_id"] in keep]
            names = {n for r in found.runs for n in r.variables}
            space = Space([v for v in space.variables if v.name in names])
            out.skipped.update(found.skipped)
        errs = [row["rel_error"] for row in validation if math.isfinite(row["rel_error"])]
        out.max_validation_error = max(errs) if errs else math.nan
        out.variables = space.names
        if found.runs and found.timing_claims:
            judge = Judge(spec, rs.runs, rs.curves, info.id, retimer, found.timing_claims, found.claim_runs)
            design = latin_hypercube(samples, len(space.variables), seed)
            shown.phase(f"re-timing the runs at {counted(samples, 'hardware setting')}", samples)
            settings = [space.setting(row) for row in design]
            retimer.prefetch(settings)  # every setting of a run in one pass; the judge then reads them
            points = []
            for setting in settings:
                points.append(judge(setting))
                shown.advance()
            for claim in found.timing_claims:
                mine = [p[claim.id] for p in points]
                counts = {k: sum(p.verdict == k for p in mine) for k in ("PASS", "FAIL", "INCONCLUSIVE")}
                stats = np.array([p.statistic for p in mine], dtype=float)
                figure = _decisive(design, space, judge.relevant[claim.id], stats) if len(set(stats)) > 1 else ""
                verdicts = [p.verdict for p in mine]
                out.claims.append(ClaimShare(claim.id, counts["PASS"] / samples, counts, figure, verdicts))
    out.wall_s, out.cpu_s = time.perf_counter() - t0, time.process_time() - c0
    return out


def timing_dependence(
    info: PaperInfo,
    rs: Any,
    samples: int | None = None,
    cache_dir: Path | None = None,
    job_for: JobSource | None = None,
    progress: Phases | None = None,
) -> Dependence | None:
    """The default check for ``info``'s timing claims, read from ``cache_dir``/:data:`CACHE_FILE` when its key
    matches, else computed and written there (``progress``: as :func:`compute`'s). ``None`` for a paper without
    timing claims."""
    from distrepro.sensitivity.collect import is_timing

    spec = info.spec
    if spec is None or not any(is_timing(c) for c in spec.claims):
        return None
    n = int(samples or min(DEFAULT_SAMPLES, spec.setup.sensitivity.samples))
    key = cache_key(info, rs.runs, n)
    path = cache_dir / CACHE_FILE if cache_dir is not None else None
    if path is not None and path.is_file():
        old = Dependence.from_json(path.read_text(encoding="utf-8"))
        if old is not None and old.key == key:
            return old
    result = compute(info, rs, n, job_for, progress)
    result.key = key
    if cache_dir is not None and path is not None:
        write_text(cache_dir, path, result.to_json())
    return result
