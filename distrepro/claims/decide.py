"""From a statistic and its CI to PASS / FAIL / INCONCLUSIVE, with a reason a reader can act on.

Under ``rule: ci`` (the default) the CI decides, whatever its width: PASS when all of it lies in the
acceptance band, FAIL when none of it does, INCONCLUSIVE otherwise. With a 95 % interval each of the
two one-sided decisions errs at most 2.5 % at a band edge. An INCONCLUSIVE reason says which edge
the interval straddles (and what lies beyond it: falling short of the claim or exceeding it), its
half-width towards that edge and how many seeds a new run would need to clear it
(:mod:`distrepro.claims.planning`). A decision records its one-sided p-value (t approximation on the
interval's scale) for Holm's step-down over the headline claims. Under ``rule: point`` the statistic
decides and the CI is only shown.

The interval decided on is, for ``t``, the skew-guarded one
(:func:`distrepro.claims.intervals.skew_guarded_t_interval`):
an end not measurably skewed away from (|G1| < 0.5 on its side) is widened by a factor calibrated on synthetic truth,
because under a right (left) skew the t-interval's upper (lower) end errs far above 2.5 % at a few seeds (18 % at
n = 5 under lognormal noise of log-sd 1; Johnson 1978, JASA 73(363), and Hall 1992, JRSS B 54(1), correct only the
first-order skew term and were measured not to hold it). The rules below read that interval unchanged; a verdict the
plain t-interval would have decided says so in its reason (:mod:`distrepro.claims.verdicts`).
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from distrepro.claims.acceptance import acceptance_band, claimed_bounds
from distrepro.claims.planning import MAX_SEEDS, one_sided_p, seeds_to_clear
from distrepro.claims.samples import interval_scale
from distrepro.claims.stats import fmt, stat

if TYPE_CHECKING:
    from distrepro.claims.verdict_record import Verdict

MORE_SEEDS = "more seeds could decide"
#: how a skew-guarded interval's seeds figure is computed, in its reason
_GUARDED = "; t times the skew guard's factor f(n) at that n, s from the plain t-interval"


def higher_is_better(claim: Any) -> bool:
    if claim.kind == "final_metric":
        return claim.direction == "max"
    return claim.kind != "convergence"


FALLS_SHORT, EXCEEDS = "falls short of the claim", "exceeds the claim"


def is_null_claim(claim: Any) -> bool:
    """A claim of *no effect* (a tie: a difference or fraction of 0, a ratio of 1) judged two-sided: a result
    beyond its band on either side contradicts it, and neither side "exceeds" it."""
    bounds = claimed_bounds(getattr(claim, "claimed", None))
    if bounds is None or claim.accept.sided != "two_sided" or claim.kind not in ("relative_improvement", "speedup"):
        return False
    null = 1.0 if claim.kind == "speedup" or claim.form == "ratio" else 0.0
    return bounds[0] == bounds[1] == null


def miss(above: bool, claim: Any) -> str:
    """Which way a result outside the band missed, in the paper's terms: a time cut of 95% against a
    claimed 72% is a FAIL of the claim as stated, but in the paper's favour, and the reader must see that.
    A claimed tie is contradicted either way, never exceeded."""
    better = above == higher_is_better(claim)
    if is_null_claim(claim):
        return f"departs from the claimed tie (the arm is {'better' if better else 'worse'})"
    return EXCEEDS if better else FALLS_SHORT


def _scaled(claim: Any, v: Verdict, ci: tuple[float, float] | None = None) -> Any:
    """The statistic, its CI (or ``ci``) and a mapper to the interval's own scale (logs for ratios:
    distrepro.claims.samples)."""
    ci = v.ci if ci is None else ci
    assert v.statistic is not None and ci is not None
    scale = interval_scale(claim)
    with np.errstate(divide="ignore", invalid="ignore"):
        return scale(v.statistic), scale(ci[0]), scale(ci[1]), scale


def _towards(claim: Any, v: Verdict, edge: float, ci: tuple[float, float] | None = None) -> tuple[float, float]:
    """``(half-width towards edge, signed distance from the statistic to the edge, positive on the statistic's
    side)`` on the interval's scale (of ``ci``, default the verdict's)."""
    point, lo, hi, scale = _scaled(claim, v, ci)
    e = scale(edge)
    return (point - lo, point - e) if e <= point else (hi - point, e - point)


def _more_seeds(claim: Any, v: Verdict, edges: list[float]) -> str:
    """ "more seeds could decide: about N …" for the edges the interval must clear; sets ``v.seeds_needed``. A
    skew-guarded t-interval (``v.plain_ci`` set) plans from the plain interval's spread and the guard's factor at
    the planned n (:func:`distrepro.claims.planning.seeds_to_clear`), not from its widened half-width."""
    needed, halves = [], []
    guarded = v.plain_ci is not None
    for edge in edges:
        half, distance = _towards(claim, v, edge)
        halves.append((half, edge))
        if distance <= 0 or not math.isfinite(distance):
            return f"the statistic sits on the edge {fmt(edge, v.unit)}: no number of seeds decides it"
        plain = _towards(claim, v, edge, v.plain_ci)[0] if guarded else half
        needed.append(seeds_to_clear(plain, distance, v.n_seeds, claim.accept.ci, guarded=guarded))
    assert v.ci is not None and v.statistic is not None
    side = [v.statistic - v.ci[0] if e <= v.statistic else v.ci[1] - v.statistic for _, e in halves]
    v.half_width = max(side)
    text = f"half-width {fmt(v.half_width, v.unit)} towards the edge"
    if any(n is None for n in needed):
        return f"{text}; {MORE_SEEDS} only past {MAX_SEEDS} seeds: the statistic is too close to the edge"
    v.seeds_needed = max(n for n in needed if n is not None)
    return (
        f"{text}; {MORE_SEEDS}: about {v.seeds_needed} seeds in a new run would clear it "
        f"(n ≈ (t·s/d)², s the per-seed spread, d the distance to the edge{_GUARDED if guarded else ''})"
    )


def _p_pass(claim: Any, v: Verdict, edges: list[float]) -> None:
    """One-sided p of a PASS: the largest over the finite edges it clears (an intersection-union test)."""
    ps = []
    for edge in edges:
        if math.isfinite(edge):
            half, distance = _towards(claim, v, edge)
            ps.append(one_sided_p(half, distance, v.n_seeds, claim.accept.ci))
    v.p_value = max(ps) if ps else None


def _p_fail(claim: Any, v: Verdict, edge: float) -> None:
    """One-sided p of a FAIL: the interval lies beyond ``edge``; the distance is measured past it."""
    point, lo, hi, scale = _scaled(claim, v)
    e = scale(edge)
    half, distance = (hi - point, e - point) if point < e else (point - lo, point - e)
    v.p_value = one_sided_p(half, distance, v.n_seeds, claim.accept.ci)


def _ci_text(v: Verdict) -> str:
    assert v.statistic is not None and v.ci is not None
    lo, hi = v.ci
    return f"{fmt(v.statistic, v.unit)} [{fmt(lo, v.unit)}, {fmt(hi, v.unit)}], n={v.n_seeds}"


def _no_ci(v: Verdict) -> bool:
    return v.ci is None or not all(math.isfinite(c) for c in v.ci)


def decide(claim: Any, v: Verdict, arms: dict[str, dict[int, float]]) -> Verdict:
    """Set ``v.verdict``, ``v.reason``, ``v.band`` (and ``v.miss`` for a FAIL outside a band)."""
    rule = claim.accept.rule
    if rule == "ci" and _no_ci(v):
        v.reason = (
            f"{v.statistic_name} {fmt(v.statistic, v.unit)}, n={v.n_seeds}: no confidence interval "
            "(no spread to estimate, or a ratio with a non-positive value); the CI rule cannot decide"
        )
        return v
    if claim.kind == "non_inferiority":
        return _non_inferiority(claim, v, arms)
    if claim.kind == "ordering":
        return _ordering(claim, v, arms)
    return _band(claim, v)


def _non_inferiority(claim: Any, v: Verdict, arms: dict[str, dict[int, float]]) -> Verdict:
    s, (lo, hi) = _computed(v)
    base = np.array(list(arms[claim.baseline].values()))
    margin = claim.margin * (abs(float(stat(base, claim.accept.statistic))) if claim.margin_kind == "rel" else 1)
    v.band = (-margin, math.inf)
    text = f"difference {_ci_text(v)}"
    worse = hi < -margin if claim.accept.rule == "ci" else s < -margin
    if lo >= -margin:
        v.verdict, v.reason = "PASS", f"{text}: CI lower bound ≥ −{fmt(margin)}"
        _p_pass(claim, v, [-margin])
    elif worse:
        what = "the whole CI is" if claim.accept.rule == "ci" else "the difference is"
        v.verdict, v.miss = "FAIL", FALLS_SHORT
        v.reason = f"{text}: {what} below the margin −{fmt(margin)}"
        _p_fail(claim, v, -margin)
    else:
        v.reason = (
            f"{text}: the CI straddles the margin −{fmt(margin)} (its lower end is below it); "
            f"{_more_seeds(claim, v, [-margin])}"
        )
    return v


def _ordering(claim: Any, v: Verdict, arms: dict[str, dict[int, float]]) -> Verdict:
    s, (lo, hi) = _computed(v)
    v.band = (claim.margin, math.inf)
    name = claim.accept.statistic
    per_arm = {n: float(stat(np.array(list(d.values())), name)) for n, d in arms.items()}
    ranked = sorted(per_arm, key=per_arm.__getitem__, reverse=claim.direction == "max")
    observed = _observed(ranked, per_arm, " > " if claim.direction == "max" else " < ")
    lower, upper = (lo, hi) if claim.accept.rule == "ci" else (s, s)
    text = f"smallest adjacent gap {_ci_text(v)}"
    if lower > claim.margin:
        v.verdict, v.reason = "PASS", f"{text} > {fmt(claim.margin)}; observed {observed}"
        _p_pass(claim, v, [claim.margin])
    elif upper <= claim.margin:
        v.verdict, v.miss = "FAIL", FALLS_SHORT
        v.reason = f"{text} ≤ {fmt(claim.margin)}; observed {observed}"
        _p_fail(claim, v, claim.margin)
    else:
        v.reason = (
            f"{text}: the CI straddles the margin {fmt(claim.margin)} (the order may or may not hold); "
            f"{_more_seeds(claim, v, [claim.margin])}; observed {observed}"
        )
    return v


def _observed(ranked: list[str], per_arm: dict[str, float], sign: str) -> str:
    """The arms in observed order; equal values (as printed, or exactly) are joined by "=", never by ">"."""
    out = f"{ranked[0]} ({fmt(per_arm[ranked[0]])})"
    for prev, name in itertools.pairwise(ranked):
        same = per_arm[prev] == per_arm[name] or fmt(per_arm[prev]) == fmt(per_arm[name])
        out += f"{' = ' if same else sign}{name} ({fmt(per_arm[name])})"
    return out


def _computed(v: Verdict) -> tuple[float, tuple[float, float]]:
    """The statistic and its interval, which every decision below is only asked for once computed."""
    assert v.statistic is not None and v.ci is not None, "decided before the statistic was computed"
    return v.statistic, v.ci


def _band(claim: Any, v: Verdict) -> Verdict:
    s, (lo, hi) = _computed(v)
    band = acceptance_band(claim, higher_is_better(claim))
    assert band is not None
    v.band = band
    a, b = band
    band_text = f"[{fmt(a, v.unit)}, {fmt(b, v.unit)}]"
    if claim.accept.rule == "point":
        inside = a <= s <= b
        v.verdict = "PASS" if inside else "FAIL"
        v.reason = (
            f"{v.statistic_name} {_ci_text(v)} {'inside' if inside else 'outside'} the acceptance band {band_text}"
        )
        if not inside:
            v.miss = miss(s > b, claim)
            v.reason += f": {v.miss}"
    elif a <= lo and hi <= b:
        v.verdict, v.reason = "PASS", f"CI of {_ci_text(v)} inside the acceptance band {band_text}"
        _p_pass(claim, v, [a, b])
    elif hi < a or lo > b:
        v.verdict, v.miss = "FAIL", miss(lo > b, claim)
        v.reason = f"CI of {_ci_text(v)} entirely outside the acceptance band {band_text}: {v.miss}"
        _p_fail(claim, v, b if lo > b else a)
    elif lo < a and hi > b:
        v.reason = (
            f"CI of {_ci_text(v)} is wider than the acceptance band {band_text}: it reaches past both edges; "
            f"{_more_seeds(claim, v, [a, b] if a <= s <= b else [b if s > b else a])}"
        )
    else:
        low_side = lo < a
        edge = a if low_side else b
        v.reason = (
            f"CI of {_ci_text(v)} straddles the {'lower' if low_side else 'upper'} edge {fmt(edge, v.unit)} of the "
            f"acceptance band {band_text} (beyond it the result {miss(not low_side, claim)}); "
            f"{_more_seeds(claim, v, [edge])}"
        )
    return v


def censored_convergence(
    claim: Any, v: Verdict, reached: dict[int, float], censored: dict[int, float], need: int, text: str
) -> Verdict:
    """Unreached seeds are lower bounds; every statistic here is monotone, so a lower-bound
    statistic already past the band's upper edge proves the claim false."""
    values = {**reached, **censored}
    band = acceptance_band(claim, higher_is_better=False)
    assert band is not None
    v.band, v.unit, v.n_seeds = band, claim.unit, len(values)
    v.points = values
    label = claim.accept.statistic.replace("_", " ")
    if len(values) >= need:
        bound = float(stat(np.array(list(values.values())), claim.accept.statistic))
        if bound > band[1]:
            v.verdict, v.statistic, v.miss = "FAIL", bound, FALLS_SHORT
            v.statistic_name = f"lower bound of the {label}"
            v.reason = (
                f"target never reached within the budget ({text}); even counting those seeds at their "
                f"budget, the {label} is ≥ {fmt(bound)} {claim.unit} > {fmt(band[1])}: {v.miss}"
            )
            return v
    v.reason = f"target never reached within the budget ({text})"
    return v
