"""Verdicts: PASS / FAIL / INCONCLUSIVE for each claim, with the statistic, its CI and per-seed values.

Input is a tidy run table (one row per run; see :mod:`distrepro.claims.runs` for the columns) and,
for claims with an explicit quality target, the per-evaluation curves. Nothing here touches
MLflow or files, so the rules can be tested on hand-built tables.

Rules, in the order they are applied to every arm a claim needs:

1. *arm missing*: no run of the arm on the claim's profile → INCONCLUSIVE;
2. *arm failed*: runs exist but none FINISHED → INCONCLUSIVE (a failed run is not evidence);
3. *target never reached* within the budget → INCONCLUSIVE, except for ``convergence`` where the
   unreached seeds count at their final epoch/step as a lower bound: if even that lower bound is
   past the acceptance band, the claim FAILS (the budget was long enough to see it fail);
4. *too few seeds*: fewer usable seeds (for paired statistics: seeds where both arms finished)
   than ``accept.min_seeds`` → INCONCLUSIVE.

Per seed, the newest FINISHED run counts (a rerun replaces an earlier one). Statistics are the
mean (default), the geometric mean (default for ratios, AlgoPerf's choice for speedups), the median
or the olympic mean (MLPerf: drop min and max), over seeds. Comparisons are *paired by seed* by
default: a seed index gives every arm the same initial model and data order (common random
numbers, :mod:`distrepro.spec.job`), so per-seed ratios or differences (per-seed gaps, for an ordering)
cancel what the arms share and the CI reflects the method, not the draw. CIs are Student-t
intervals on those per-seed values (their logs for a geometric mean), or BCa bootstraps for
medians and unpaired comparisons, whose generator is seeded from the paper and claim id
(:func:`distrepro.seeding.derive_seed`), so a report is bit-for-bit reproducible.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from distrepro import metrics as M
from distrepro.claims.acceptance import claimed_bounds
from distrepro.claims.decide import censored_convergence, decide
from distrepro.claims.intervals import bca_interval, percentile_interval, t_interval
from distrepro.claims.regime import check_detectable, first_unmet, run_checks
from distrepro.claims.schema import Claim, PaperSpec
from distrepro.claims.stats import fmt, stat
from distrepro.claims.verdict_record import Verdict, VerdictKind
from distrepro.seeding import derive_seed
from distrepro.tracking.runlog import flatten_params

__all__ = ["Verdict", "evaluate_claim", "evaluate_claims", "fmt", "latest_per_seed", "select_arm"]
#: claim unit → curve column
UNIT_COLUMN = {
    "emulated": M.EMULATED_S,
    "emulated_s": M.EMULATED_S,
    "wall": M.WALL_S,
    "steps": "step",
    "epochs": M.EPOCH,
    "samples": M.SAMPLES,
}
_TARGET_SUMMARIES = {M.TIME_TO_TARGET_S, M.STEP_TO_TARGET}


class _Inconclusive(Exception):
    """Raised while gathering evidence; becomes an INCONCLUSIVE verdict with this reason."""

    def __init__(self, reason: str, verdict: VerdictKind = "INCONCLUSIVE", out_of_regime: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.verdict = verdict
        self.out_of_regime = out_of_regime


# ---------------------------------------------------------------- selecting runs


def _same(logged: Any, wanted: Any) -> bool:
    if logged is None or (isinstance(logged, float) and math.isnan(logged)):
        return False
    if str(logged) == str(wanted):
        return True
    try:
        return math.isclose(float(logged), float(wanted))
    except (TypeError, ValueError):
        return False


def select_arm(runs: pd.DataFrame, spec: PaperSpec, name: str, profile: str | None, scale: str | None) -> pd.DataFrame:
    """Rows of ``runs`` that belong to arm ``name`` on ``profile`` (any profile if ``None``)."""
    arm = spec.arm(name)
    mask = runs["method"] == arm.method
    if profile is not None:
        mask &= runs["profile"] == profile
    if scale is not None and "scale" in runs:  # runs that do not record a scale are taken as the claim's
        mask &= runs["scale"].fillna(scale).replace("", scale) == scale
    if arm.campaign is not None:
        mask &= runs.get("campaign", pd.Series(None, index=runs.index)) == arm.campaign
    for key, wanted in (flatten_params({"method_params": arm.params}) if arm.params else {}).items():
        col = f"params.{key}"
        mask &= runs[col].map(lambda x, w=wanted: _same(x, w)) if col in runs else False
    return runs[mask]


def latest_per_seed(rows: pd.DataFrame) -> tuple[pd.DataFrame, dict[int, str]]:
    """Per seed the newest FINISHED run (indexed by seed), and the status of seeds with none."""
    order = rows.sort_values("start_time", kind="stable") if "start_time" in rows else rows
    picked, bad = [], {}
    for seed, group in order.groupby("seed", sort=True):
        done = group[group["status"] == "FINISHED"]
        if len(done):
            picked.append(done.iloc[-1])
        else:
            bad[int(seed)] = str(group["status"].iloc[-1])
    frame = pd.DataFrame(picked).set_index("seed", drop=False) if picked else rows.iloc[0:0]
    return frame, bad


# ---------------------------------------------------------------- per-seed values


def metric_column(runs: pd.DataFrame, metric: str) -> str | None:
    """``metric`` if the table has it, else ``final/<metric>`` (so ``val_accuracy`` means the final one)."""
    for col in (metric, M.final(metric)):
        if col in runs.columns:
            return col
    return None


def crossing(curve: pd.DataFrame, metric: str, value: float, direction: str, unit_col: str) -> tuple[float, bool]:
    """``(unit value at the first evaluation meeting the target, True)``; else ``(last unit value, False)``."""
    curve = curve.sort_values("step")
    hit = curve[metric] >= value if direction == "max" else curve[metric] <= value
    if hit.any():
        return float(curve.loc[hit.idxmax(), unit_col]), True
    return float(curve[unit_col].max()), False


def _seed_values(
    claim: Any, rows: pd.DataFrame, curves: pd.DataFrame | None, metric: str | None
) -> tuple[dict[int, float], dict[int, float], list[int]]:
    """``(values, censored, missing)`` per seed: reached values, lower bounds of unreached ones, seeds without data."""
    values: dict[int, float] = {}
    censored: dict[int, float] = {}
    missing: list[int] = []
    target = getattr(claim, "target", None)
    if target is not None:  # read the curves: convergence, or speedup to an explicit target
        unit_col = UNIT_COLUMN[getattr(claim, "unit", None) or claim.clock]
        for seed, row in rows.iterrows():
            curve = None if curves is None else curves[curves["run_id"] == row["run_id"]]
            if curve is None or curve.empty or target.metric not in curve or unit_col not in curve:
                missing.append(int(seed))
                continue
            curve = curve.dropna(subset=[target.metric, unit_col])
            if curve.empty:
                missing.append(int(seed))
                continue
            v, ok = crossing(curve, target.metric, target.value, target.direction, unit_col)
            (values if ok else censored)[int(seed)] = v
        return values, censored, missing
    col = metric_column(rows, metric) if metric else None
    for seed, row in rows.iterrows():
        cell = row.get(col) if col else None
        reached = row.get(M.TARGET_REACHED)
        if col in _TARGET_SUMMARIES and reached is not None and not pd.isna(reached) and float(reached) == 0:
            censored[int(seed)] = math.inf
        elif cell is None or pd.isna(cell):
            missing.append(int(seed))
        else:
            values[int(seed)] = float(cell)
    return values, censored, missing


def _claim_metric(claim: Any) -> str | None:
    if claim.kind == "speedup" and claim.target is None:
        if claim.measure == "time_to_target":
            return M.TIME_TO_TARGET_S
        return M.FINAL_EMULATED_S if claim.clock == "emulated" else M.FINAL_WALL_S
    return getattr(claim, "metric", None)


def _relative(form: str, direction: str) -> Callable[[Any, Any], Any]:
    if form == "ratio":
        return (lambda a, b: a / b) if direction == "max" else (lambda a, b: b / a)
    if form == "difference":  # arm - base in the metric's own unit (accuracy points), signed so better is positive
        return (lambda a, b: a - b) if direction == "max" else (lambda a, b: b - a)
    return (lambda a, b: a / b - 1) if direction == "max" else (lambda a, b: 1 - a / b)


def _relative_unit(claim: Any) -> str:
    return {"ratio": "x", "fraction": "fraction"}.get(claim.form, claim.metric)


_STAT_LABEL = {"median": "median", "mean": "mean", "geometric_mean": "geometric mean", "olympic_mean": "olympic mean"}


# ---------------------------------------------------------------- the engine


def evaluate_claim(
    claim: Claim, spec: PaperSpec, runs: pd.DataFrame, curves: pd.DataFrame | None = None, paper_id: str = ""
) -> Verdict:
    """Judge one claim (already resolved by :func:`distrepro.claims.schema.validate_paper`)."""
    verdict = Verdict(claim.id, claim.kind, "INCONCLUSIVE", "")
    try:
        return _evaluate(claim, spec, runs, curves, paper_id or spec.citation.id, verdict)
    except _Inconclusive as exc:  # keep whatever per-seed values were gathered: they explain the reason
        verdict.verdict, verdict.reason, verdict.out_of_regime = exc.verdict, exc.reason, exc.out_of_regime
        return verdict


def evaluate_claims(
    spec: PaperSpec, runs: pd.DataFrame, curves: pd.DataFrame | None = None, paper_id: str = ""
) -> list[Verdict]:
    return [evaluate_claim(c, spec, runs, curves, paper_id) for c in spec.claims]


def _gather(claim: Any, spec: PaperSpec, runs: pd.DataFrame, name: str) -> pd.DataFrame:
    rows = select_arm(runs, spec, name, claim.profile, claim.scale)
    where = f" on profile {claim.profile!r}" if claim.profile else ""
    if rows.empty:
        raise _Inconclusive(f"arm missing: no runs of '{name}' (method {spec.arm(name).method}){where}")
    if claim.profile is None and rows["profile"].nunique() > 1:
        profiles = ", ".join(sorted(rows["profile"].unique()))
        raise _Inconclusive(f"arm '{name}' ran on several profiles ({profiles}); set the claim's profile")
    done, bad = latest_per_seed(rows)
    if done.empty:
        detail = ", ".join(f"seed {s} {st}" for s, st in sorted(bad.items()))
        raise _Inconclusive(f"arm failed: no finished run of '{name}'{where} ({detail})")
    return done


def _evaluate(
    claim: Any, spec: PaperSpec, runs: pd.DataFrame, curves: pd.DataFrame | None, paper: str, verdict: Verdict
) -> Verdict:
    acc = claim.accept
    names = list(claim.arms) if claim.kind == "ordering" else [claim.arm]
    if hasattr(claim, "baseline"):
        names.append(claim.baseline)
    metric = _claim_metric(claim)
    arms: dict[str, dict[int, float]] = {}
    censored_all: dict[str, dict[int, float]] = {}
    unusable: str | None = None
    for name in names:
        done = _gather(claim, spec, runs, name)
        from_summary = metric is not None and getattr(claim, "target", None) is None
        if from_summary and metric_column(done, metric) is None:  # type: ignore[arg-type]
            raise _Inconclusive(f"metric '{metric}' was not logged by arm '{name}'")
        values, censored, missing = _seed_values(claim, done, curves, metric)
        if not values and not censored and unusable is None:
            unusable = f"no usable value of '{metric or 'target'}' in arm '{name}' (seeds {missing})"
        arms[name], censored_all[name] = values, censored
        verdict.per_seed[name] = dict(values)
        if censored:
            verdict.censored[name] = dict(censored)
    need = acc.min_seeds if acc.statistic != "olympic_mean" else max(acc.min_seeds, 3)
    # before "no usable value": a curve that never left the round-off floor has no decay rate, and the regime says why
    _check_regime(claim, spec, runs, verdict)
    if unusable is not None:
        raise _Inconclusive(unusable)

    unreached = {n: sorted(c) for n, c in censored_all.items() if c}
    if unreached:
        text = "; ".join(f"'{n}' seeds {s}" for n, s in unreached.items())
        if claim.kind == "convergence":
            return censored_convergence(claim, verdict, arms[claim.arm], censored_all[claim.arm], need, text)
        raise _Inconclusive(f"target never reached within the budget ({text})")

    verdict.paired, verdict.ci_method = bool(acc.paired and len(names) > 1), acc.ci_method
    if verdict.paired:
        common = sorted(set.intersection(*(set(arms[n]) for n in names)))
        if len(common) < need:
            both = " and ".join(f"'{n}'" for n in names)
            raise _Inconclusive(
                f"too few seeds: {len(common)} with {'both' if len(names) == 2 else 'all of'} {both} finished "
                f"(seeds {common}), {need} required"
            )
        _check_tie(claim, arms, names, common)
        sample = _paired_sample(claim, arms, names, common, verdict)
        _check_detectable(claim, verdict)
    else:
        for name in names:
            if len(arms[name]) < need:
                usable = sorted(arms[name])
                raise _Inconclusive(
                    f"too few seeds: '{name}' has {len(usable)} usable (seeds {usable}), {need} required"
                )
        sample = _unpaired_sample(claim, arms, names, verdict)
    point, ci = _interval(acc, sample, derive_seed("claims", paper, claim.id))
    if not math.isfinite(point):
        raise _Inconclusive(
            f"the {_STAT_LABEL[acc.statistic]} is undefined for these values (non-positive values for a ratio?)"
        )
    verdict.statistic, verdict.ci = point, ci
    return decide(claim, verdict, arms)


def _check_regime(claim: Any, spec: PaperSpec, runs: pd.DataFrame, verdict: Verdict) -> None:
    """Measure the claim's ``metric``/``control`` regime conditions on the deciding runs, before any CI."""

    def values_of(arm: str, metric: str) -> dict[int, float] | None:
        done = _gather(claim, spec, runs, arm)
        col = metric_column(done, metric)
        if col is None:
            return None
        return {int(s): float(v) for s, v in done[col].items() if not pd.isna(v)}

    verdict.regime = run_checks(claim, values_of)
    reason = first_unmet(verdict.regime)
    if reason is not None:
        raise _Inconclusive(reason, out_of_regime=True)


def _check_detectable(claim: Any, verdict: Verdict) -> None:
    """The ``detectable`` conditions, on the claim's paired per-seed values (see distrepro.claims.regime)."""
    bounds = claimed_bounds(getattr(claim, "claimed", None))
    effect = min(abs(bounds[0]), abs(bounds[1])) if bounds is not None else None
    for cond in claim.regime:
        if cond.check == "detectable":
            verdict.regime.append(check_detectable(cond, verdict.points, effect, claim.accept.ci))
    reason = first_unmet(verdict.regime)
    if reason is not None:
        raise _Inconclusive(reason, out_of_regime=True)


#: comparisons of arms that an exact tie cannot decide (a claimed ratio of 1 may be met by a tie: speedups stay)
_TIE_KINDS = ("ordering", "relative_improvement", "non_inferiority")


def _check_tie(claim: Any, arms: dict[str, dict[int, float]], names: list[str], seeds: list[int]) -> None:
    """Identical outcomes of every arm on every paired seed: the scale cannot tell the arms apart."""
    if claim.kind not in _TIE_KINDS or not seeds:
        return
    first = arms[names[0]]
    if all(arms[n][s] == first[s] for n in names[1:] for s in seeds):
        where = " and ".join(f"'{n}'" for n in names)
        raise _Inconclusive(
            f"no difference resolvable at this scale: {where} give identical values on every seed "
            f"({', '.join(f'seed {s}: {fmt(first[s])}' for s in seeds)})",
            out_of_regime=True,
        )


@dataclass
class _Sample:
    """What the CI is computed from: per-seed value rows (paired, or one arm) or independent samples.

    ``rows`` is ``(groups, seeds)``: one row of per-seed values for a paired ratio or difference or a
    single arm; one row per adjacent pair of a paired ordering, whose statistic is the smallest
    row statistic. ``samples`` and ``combine`` serve the bootstrap of unpaired comparisons.
    """

    statistic: str
    rows: np.ndarray | None = None
    samples: list[np.ndarray] = field(default_factory=list)
    combine: Callable[[list[np.ndarray]], Any] | None = None


def _paired_sample(
    claim: Any, arms: dict[str, dict[int, float]], names: list[str], seeds: list[int], v: Verdict
) -> _Sample:
    by_arm = {n: np.array([arms[n][s] for s in seeds]) for n in names}
    label = _STAT_LABEL[claim.accept.statistic]
    if claim.kind == "ordering":
        sign = 1 if claim.direction == "max" else -1
        rows = np.stack([sign * (by_arm[p] - by_arm[q]) for p, q in itertools.pairwise(names)])
        v.unit, v.statistic_name = claim.metric, f"smallest adjacent {label} of per-seed gaps (paired by seed)"
        v.n_seeds = len(seeds)
        v.points = dict(zip(seeds, rows.min(axis=0).tolist(), strict=True))
        return _Sample(claim.accept.statistic, rows)
    a, b = by_arm[claim.arm], by_arm[claim.baseline]
    if claim.kind == "speedup":
        derived, v.unit = b / a, "x"
    elif claim.kind == "relative_improvement":
        derived = _relative(claim.form, claim.direction)(a, b)
        v.unit = _relative_unit(claim)
    else:
        derived, v.unit = (a - b) * (1 if claim.direction == "max" else -1), claim.metric
    v.points = dict(zip(seeds, derived.tolist(), strict=True))
    v.n_seeds = len(seeds)
    what = "ratios" if v.unit == "x" else ("differences" if claim.kind == "non_inferiority" else "values")
    v.statistic_name = f"{label} of per-seed {what} (paired by seed)"
    return _Sample(claim.accept.statistic, derived[None, :])


def _unpaired_sample(claim: Any, arms: dict[str, dict[int, float]], names: list[str], v: Verdict) -> _Sample:
    samples = [np.array(list(arms[n].values())) for n in names]
    label = _STAT_LABEL[claim.accept.statistic]
    v.n_seeds = min(len(s) for s in samples)
    if len(names) == 1:
        v.points = dict(arms[names[0]])
        v.unit = claim.unit if claim.kind == "convergence" else claim.metric
        v.statistic_name = label
        return _Sample(claim.accept.statistic, samples[0][None, :])
    combine, v.unit = _unpaired(claim, claim.accept.statistic)
    v.statistic_name = f"from per-arm {label}s (unpaired)"
    return _Sample(claim.accept.statistic, None, samples, combine)


def _interval(acc: Any, sample: _Sample, seed: int) -> tuple[float, tuple[float, float]]:
    """The statistic and its CI by ``acc.ci_method`` (see :mod:`distrepro.claims.intervals`)."""
    if sample.rows is not None:
        rows = sample.rows
        point = float(np.min(stat(rows, sample.statistic)))
        if acc.ci_method == "t":
            log = sample.statistic == "geometric_mean"
            bounds = np.array([t_interval(r, acc.ci, log=log) for r in rows])
            return point, (float(bounds[:, 0].min()), float(bounds[:, 1].min()))
        index = np.arange(rows.shape[1])

        def paired(s: list[np.ndarray]) -> Any:  # resample seeds (columns) jointly, keeping pairs together
            return np.min(stat(rows[:, s[0]], sample.statistic), axis=0)

        combine: Callable[[list[np.ndarray]], Any] = paired

        samples: list[np.ndarray] = [index]
    else:
        assert sample.combine is not None
        combine, samples = sample.combine, sample.samples
        point = float(combine(samples))
    method = bca_interval if acc.ci_method == "bca" else percentile_interval
    return point, method(samples, combine, seed, acc.n_boot, acc.ci)


def _unpaired(claim: Any, name: str) -> tuple[Callable[[list[np.ndarray]], Any], str]:
    if claim.kind == "speedup":
        return (lambda s: stat(s[1], name) / stat(s[0], name)), "x"
    if claim.kind == "relative_improvement":
        f = _relative(claim.form, claim.direction)
        return (lambda s: f(stat(s[0], name), stat(s[1], name))), _relative_unit(claim)
    if claim.kind == "non_inferiority":
        sign = 1 if claim.direction == "max" else -1
        return (lambda s: sign * (stat(s[0], name) - stat(s[1], name))), claim.metric
    sign = 1 if claim.direction == "max" else -1  # ordering

    def gaps(s: list[np.ndarray]) -> Any:
        per_arm = [stat(x, name) for x in s]
        return np.min(np.stack([sign * (p - q) for p, q in itertools.pairwise(per_arm)]), axis=0)

    return gaps, claim.metric
