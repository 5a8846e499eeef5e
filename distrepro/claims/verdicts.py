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

Then the interval decides (:mod:`distrepro.claims.decide`): an interval wholly inside the acceptance
band PASSes, one wholly outside FAILs, whatever its width; one that straddles an edge is
INCONCLUSIVE and says how many seeds would clear that edge (:mod:`distrepro.claims.planning`). No
"could we have detected it" condition is applied after the data (a ``detectable`` regime condition
is a planning figure, printed, never a gate: gating on the observed spread keeps exactly the samples
whose spread happens to be small, on which the interval under-covers). A measured claim judged by
``rule: point`` or a bootstrap interval is refused below 10 seeds.

Evidence gathering (which runs, per-seed values) is :mod:`distrepro.claims.gather`; the statistics
and intervals are :mod:`distrepro.claims.samples`; every resampling generator is seeded from the
paper and claim id (:func:`distrepro.seeding.derive_seed`), so a report is bit-for-bit reproducible.
:func:`judge_values` is the rule alone, on per-seed values: the sensitivity sweep and the
calibration test (``tests/claims/test_verdict_rule_calibration.py``) call it without a run table.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from distrepro.claims.acceptance import claimed_bounds, refused_below
from distrepro.claims.decide import censored_convergence, decide
from distrepro.claims.gather import UNIT_COLUMN, claim_metric, crossing, latest_per_seed, metric_column, seed_values
from distrepro.claims.gather import select_arm as select_arm
from distrepro.claims.intervals import SKEW_G1, skew_factor
from distrepro.claims.regime import check_detectable, first_unmet, run_checks
from distrepro.claims.samples import STAT_LABEL, interval, interval_scale, paired_sample, unpaired_sample
from distrepro.claims.schema import Claim, PaperSpec
from distrepro.claims.stats import fmt, skewness
from distrepro.claims.verdict_record import Verdict, VerdictKind
from distrepro.seeding import derive_seed

__all__ = [
    "UNIT_COLUMN",
    "Verdict",
    "crossing",
    "evaluate_claim",
    "evaluate_claims",
    "fmt",
    "judge_values",
    "latest_per_seed",
    "metric_column",
    "select_arm",
]


class _Inconclusive(Exception):
    """Raised while gathering evidence; becomes an INCONCLUSIVE verdict with this reason."""

    def __init__(self, reason: str, verdict: VerdictKind = "INCONCLUSIVE", out_of_regime: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.verdict = verdict
        self.out_of_regime = out_of_regime


def evaluate_claim(
    claim: Claim, spec: PaperSpec, runs: pd.DataFrame, curves: pd.DataFrame | None = None, paper_id: str = ""
) -> Verdict:
    """Judge one claim (already resolved by :func:`distrepro.claims.schema.validate_paper`)."""
    verdict = Verdict(claim.id, claim.kind, "INCONCLUSIVE", "", ci_level=claim.accept.ci)
    try:
        return _evaluate(claim, spec, runs, curves, paper_id or spec.citation.id, verdict)
    except _Inconclusive as exc:  # keep whatever per-seed values were gathered: they explain the reason
        verdict.verdict, verdict.reason, verdict.out_of_regime = exc.verdict, exc.reason, exc.out_of_regime
        return verdict


def evaluate_claims(
    spec: PaperSpec, runs: pd.DataFrame, curves: pd.DataFrame | None = None, paper_id: str = ""
) -> list[Verdict]:
    return [evaluate_claim(c, spec, runs, curves, paper_id) for c in spec.claims]


def judge_values(claim: Any, arms: dict[str, dict[int, float]], paper: str, verdict: Verdict | None = None) -> Verdict:
    """The verdict rule alone: ``arms`` maps each arm the claim reads to its per-seed values (regime conditions
    and censoring are the caller's). The same code :func:`evaluate_claim` runs once it has gathered the runs."""
    if verdict is None:
        verdict = Verdict(claim.id, claim.kind, "INCONCLUSIVE", "", ci_level=claim.accept.ci)
        verdict.per_seed = {name: dict(values) for name, values in arms.items()}
    try:
        return _judge(claim, arms, paper, verdict)
    except _Inconclusive as exc:
        verdict.verdict, verdict.reason, verdict.out_of_regime = exc.verdict, exc.reason, exc.out_of_regime
        return verdict


def _names(claim: Any) -> list[str]:
    names = list(claim.arms) if claim.kind == "ordering" else [claim.arm]
    if hasattr(claim, "baseline"):
        names.append(claim.baseline)
    return names


def _needed(claim: Any) -> int:
    acc = claim.accept
    return int(acc.min_seeds if acc.statistic != "olympic_mean" else max(acc.min_seeds, 3))


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
    names = _names(claim)
    metric = claim_metric(claim)
    arms: dict[str, dict[int, float]] = {}
    censored_all: dict[str, dict[int, float]] = {}
    unusable: str | None = None
    for name in names:
        done = _gather(claim, spec, runs, name)
        verdict.arm_profiles[name] = sorted(str(p) for p in done["profile"].dropna().unique())
        from_summary = metric is not None and getattr(claim, "target", None) is None
        if from_summary and metric_column(done, metric) is None:  # type: ignore[arg-type]
            raise _Inconclusive(f"metric '{metric}' was not logged by arm '{name}'")
        values, censored, missing = seed_values(claim, done, curves, metric)
        if not values and not censored and unusable is None:
            unusable = f"no usable value of '{metric or 'target'}' in arm '{name}' (seeds {missing})"
        arms[name], censored_all[name] = values, censored
        verdict.per_seed[name] = dict(values)
        if censored:
            verdict.censored[name] = dict(censored)
    # before "no usable value": a curve that never left the round-off floor has no decay rate, and the regime says why
    _check_regime(claim, spec, runs, verdict)
    if unusable is not None:
        raise _Inconclusive(unusable)

    unreached = {n: sorted(c) for n, c in censored_all.items() if c}
    if unreached:
        text = "; ".join(f"'{n}' seeds {s}" for n, s in unreached.items())
        if claim.kind == "convergence":
            return censored_convergence(claim, verdict, arms[claim.arm], censored_all[claim.arm], _needed(claim), text)
        raise _Inconclusive(f"target never reached within the budget ({text})")
    return _judge(claim, arms, paper, verdict)


def _judge(claim: Any, arms: dict[str, dict[int, float]], paper: str, verdict: Verdict) -> Verdict:
    acc, names, need = claim.accept, _names(claim), _needed(claim)
    verdict.paired, verdict.ci_method = bool(acc.paired and len(names) > 1), acc.ci_method
    if verdict.paired:
        common = sorted(set.intersection(*(set(arms[n]) for n in names)))
        if len(common) < need:
            verdict.n_seeds = len(common)
            both = " and ".join(f"'{n}'" for n in names)
            raise _Inconclusive(
                f"too few seeds: {len(common)} with {'both' if len(names) == 2 else 'all of'} {both} finished "
                f"(seeds {common}), {need} required"
            )
        _check_tie(claim, arms, names, common)
        sample = paired_sample(claim, arms, names, common, verdict)
        _plan_detectable(claim, verdict)
        if verdict.across_profiles:
            verdict.statistic_name = verdict.statistic_name.replace(
                "(paired by seed)", "(paired by seed index across profiles: not the same initial model)"
            )
    else:
        for name in names:
            if len(arms[name]) < need:
                usable = sorted(arms[name])
                verdict.n_seeds = min(verdict.n_seeds or len(usable), len(usable))
                raise _Inconclusive(
                    f"too few seeds: '{name}' has {len(usable)} usable (seeds {usable}), {need} required"
                )
        sample = unpaired_sample(claim, arms, names, verdict)
    refusal = refused_below(claim, verdict.n_seeds)
    if refusal is not None:
        raise _Inconclusive(refusal)
    point, ci = interval(acc, sample, derive_seed("claims", paper, claim.id))
    if not math.isfinite(point):
        raise _Inconclusive(
            f"the {STAT_LABEL[acc.statistic]} is undefined for these values (non-positive values for a ratio?)"
        )
    verdict.statistic, verdict.ci = point, ci
    scale = interval_scale(claim)
    with np.errstate(divide="ignore", invalid="ignore"):
        verdict.skew = skewness([scale(x) for x in verdict.points.values()])
    plain = interval(acc, sample, 0, skew_guard=False)[1] if acc.ci_method == "t" else None
    if plain is not None and sample.rows is not None:  # a skew-guarded t-interval: seeds are planned on the plain one
        verdict.plain_ci = plain
    decide(claim, verdict, arms)
    if plain is not None:
        _skew_guard_note(claim, verdict, arms, plain)
    return verdict


def _skew_guard_note(
    claim: Any, verdict: Verdict, arms: dict[str, dict[int, float]], plain: tuple[float, float]
) -> None:
    """Say which end the skew guard widened (:func:`distrepro.claims.intervals.skew_guarded_t_interval`) and, when
    the plain t-interval would have decided what the guarded one leaves INCONCLUSIVE, say so in the reason."""
    assert verdict.ci is not None
    ends = [name for name, a, b in (("lower", plain[0], verdict.ci[0]), ("upper", plain[1], verdict.ci[1])) if a != b]
    if not ends:
        return
    g1, n = verdict.skew, verdict.n_seeds
    which = " and ".join(ends) + (" ends" if len(ends) == 2 else " end")
    verdict.skew_note = (
        f"skew guard: per-seed values not measurably skewed away from the {which} (G1 = {fmt(g1)}, "
        f"|G1| < {SKEW_G1} on that side): widened ×{skew_factor(n):.2f} from the plain t-interval "
        f"[{fmt(plain[0], verdict.unit)}, {fmt(plain[1], verdict.unit)}], whose one-sided error under skewed "
        f"per-seed noise exceeds nominal at n = {n}"
    )
    if verdict.verdict != "INCONCLUSIVE":
        return
    bare = replace(verdict, ci=plain, reason="", seeds_needed=None, half_width=None, p_value=None, miss="")
    decide(claim, bare, arms)
    if bare.verdict != "INCONCLUSIVE":
        verdict.reason += (
            f"; per-seed values skewed or not measurably symmetric (G1 = {fmt(g1)}): the t-interval's one-sided "
            f"error exceeds nominal at n = {n}, so its {which} {'are' if len(ends) == 2 else 'is'} widened "
            f"×{skew_factor(n):.2f}; the plain t-interval [{fmt(plain[0], verdict.unit)}, "
            f"{fmt(plain[1], verdict.unit)}] would have said {bare.verdict}"
        )


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


def _plan_detectable(claim: Any, verdict: Verdict) -> None:
    """``detectable`` conditions: printed planning figures on the paired per-seed values, never a gate."""
    bounds = claimed_bounds(getattr(claim, "claimed", None))
    effect = min(abs(bounds[0]), abs(bounds[1])) if bounds is not None else None
    for cond in claim.regime:
        if cond.check == "detectable":
            verdict.regime.append(check_detectable(cond, verdict.points, effect, claim.accept.ci))


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
