"""The skew guard on synthetic truth at n = 5: one-sided error at most twice nominal under normal and right-skewed
per-seed noise, and the power it leaves (:func:`distrepro.claims.intervals.skew_guarded_t_interval`).

The per-seed values of a paired difference are ``edge + noise`` (truth exactly on the upper edge of a band, where a
PASS is an error) or ``edge − 1.5`` and ``edge − 3`` noise sd (well inside). Noise: normal, centred exponential
(skewness 2) and centred lognormal of log-sd 1 (skewness 6.2), each scaled to unit variance. The vectorised Monte
Carlo (4000 experiments per cell, fixed generator seeds) reads :func:`skew_guarded_bounds`, the rows the rule's
interval is computed by; a smaller run through :func:`judge_values` (the real pipeline: schema, pairing, the
rule) must agree with it experiment by experiment. Bounds: a rate of 5 % yields more than
``binom.ppf(0.999, 4000, 0.05)`` = 243 PASSes of 4000 with probability 0.1 %; the guard was calibrated to 4 %.
Measured when written (PASS rate at the edge / 1.5 sd inside / 3 sd inside): normal 0.8 / 23 / 45 %, exponential
1.8 / 19 / 45 %, lognormal 3.4 / 35 / 63 %; the plain t-interval (100 000 draws, at the edge / 1.5 sd inside):
normal 2.5 / 71 %, exponential 11 / 72 %, lognormal 18 / 80 %.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from distrepro.claims.intervals import skew_guarded_bounds, t_quantile
from distrepro.claims.schema import validate_paper
from distrepro.claims.verdicts import judge_values
from distrepro.seeding import derive_seed

N, COUNT, THROUGH_RULE = 5, 4000, 300
EDGE_BOUND = 243  # binom.ppf(0.999, 4000, 0.05)
#: the band [−0.1, 0.1] of a difference claimed 0 ± 0.1; the noise sd is 0.01 (the lower edge 20 sd away)
CLAIM = validate_paper(
    yaml.safe_load(
        """
kind: reproduction
citation: {id: skew, title: "Synthetic skewed seeds"}
setup: {profile: hetero-2fast-2slow, baseline: base, min_seeds: 3}
claims:
  - id: gap
    kind: relative_improvement
    statement: "the arm is within 10 points of the baseline"
    arm: fast
    metric: final/val_accuracy
    direction: max
    form: difference
    claimed: 0.0
    accept: {abs_tolerance: 0.1}
    source: {kind: text}
    evidence: reconstructed
"""
    )
).claims[0]
UPPER, LOWER, SD = 0.1, -0.1, 0.01


def _noise(kind: str, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    if kind == "normal":
        return rng.standard_normal(shape)
    if kind == "exponential":
        return rng.standard_exponential(shape) - 1.0
    x = rng.lognormal(0.0, 1.0, shape)  # "lognormal", log-sd 1
    return (x - math.exp(0.5)) / math.sqrt((math.e - 1) * math.e)


def _values(kind: str, inside: float, count: int) -> np.ndarray:
    rng = np.random.default_rng(derive_seed("skew-guard", kind, inside, count))
    return UPPER - inside * SD + SD * _noise(kind, rng, (count, N))


def _pass_rate(x: np.ndarray) -> float:
    lo, hi = skew_guarded_bounds(x, 0.95)
    return float(np.mean((lo >= LOWER) & (hi <= UPPER)))


@pytest.mark.parametrize("kind", ["normal", "exponential", "lognormal"])
def test_at_the_upper_edge_the_false_pass_rate_is_at_most_twice_nominal(kind: str) -> None:
    x = _values(kind, 0.0, COUNT)
    assert _pass_rate(x) * COUNT <= EDGE_BOUND, f"{kind}: {_pass_rate(x):.2%} false PASS at n = {N}"
    if kind != "normal":  # the plain t-interval, for contrast: its upper end errs far above nominal under skew
        half = t_quantile(0.95, N - 1) * x.std(axis=-1, ddof=1) / math.sqrt(N)
        assert np.mean(x.mean(axis=-1) + half <= UPPER) > 0.09


@pytest.mark.parametrize(("kind", "floor_15", "floor_3"), [("normal", 0.21, 0.43), ("exponential", 0.17, 0.43),
                                                           ("lognormal", 0.32, 0.60)])  # fmt: skip
def test_well_inside_the_band_the_rule_still_passes(kind: str, floor_15: float, floor_3: float) -> None:
    """Measured 23 / 45 % (normal), 19 / 45 % (exponential), 35 / 63 % (lognormal) at 1.5 / 3 sd inside; the floors
    sit about 4 binomial sd below. The guard costs power at 5 seeds: that is the price of a mean whose noise may be
    skewed (the module docstring of distrepro.claims.intervals)."""
    assert _pass_rate(_values(kind, 1.5, COUNT)) >= floor_15
    assert _pass_rate(_values(kind, 3.0, COUNT)) >= floor_3


@pytest.mark.parametrize("kind", ["normal", "lognormal"])
def test_the_rule_through_judge_values_agrees_with_the_vectorised_bounds(kind: str) -> None:
    x = _values(kind, 0.0, THROUGH_RULE) + 0.0
    lo, hi = skew_guarded_bounds(x, 0.95)
    base = 0.7 + 0.05 * np.random.default_rng(derive_seed("skew-guard-base", kind)).standard_normal(x.shape)
    for row, a, b, (low, high) in zip(x, base + x, base, zip(lo, hi, strict=True), strict=True):
        arms = {"fast": dict(enumerate(a.tolist())), "base": dict(enumerate(b.tolist()))}
        v = judge_values(CLAIM, arms, "skew")
        assert v.ci == pytest.approx((low, high), abs=1e-9), row
        assert (v.verdict == "PASS") == (low >= LOWER and high <= UPPER)
        if v.verdict == "INCONCLUSIVE" and "would have said PASS" in v.reason:
            assert "per-seed values skewed or not measurably symmetric (G1 = " in v.reason
