"""Seeds to clear an edge (n ≈ (t·s/d)²) and the one-sided p of a decision, against scipy's t distribution."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from distrepro.claims.planning import (
    MAX_SEEDS,
    implied_spread,
    one_sided_p,
    seeds_for_power,
    seeds_for_spread,
    seeds_to_clear,
)


def _half(s: float, n: int, level: float = 0.95) -> float:
    return float(stats.t.ppf(0.5 + level / 2, n - 1)) * s / math.sqrt(n)


@pytest.mark.parametrize(("spread", "distance"), [(1.0, 0.5), (0.012, 0.004), (2.0, 3.0), (0.3, 0.01)])
def test_seeds_for_spread_is_the_smallest_n_that_clears_the_distance(spread: float, distance: float) -> None:
    n = seeds_for_spread(spread, distance)
    assert n is not None and n >= 2
    assert _half(spread, n) < distance
    step = 1 if n <= 1000 else n // 100 + 1  # the search steps by 1 up to 1000 seeds, then by 1 %
    assert n == 2 or _half(spread, n - step) >= distance  # a step fewer would not clear it
    assert n >= (1.959963984540054 * spread / distance) ** 2  # never below the normal approximation


def test_an_interval_gives_back_the_seeds_of_its_own_spread() -> None:
    # a straddling interval of half-width h at n seeds implies s = h·√n/t; the seeds to clear d follow from s
    s, n, d = 0.8, 5, 0.3
    h = _half(s, n)
    assert implied_spread(h, n, 0.95) == pytest.approx(s, rel=1e-12)
    assert seeds_to_clear(h, d, n, 0.95) == seeds_for_spread(s, d, start=n + 1)


def test_no_seed_count_for_a_statistic_on_the_edge() -> None:
    assert seeds_for_spread(1.0, 0.0) is None and seeds_to_clear(1.0, 0.0, 5, 0.95) is None
    assert seeds_for_spread(1.0, 1e-4) is None  # more than MAX_SEEDS
    assert seeds_for_spread(1.0, 1.0 / math.sqrt(MAX_SEEDS) * 3) is not None


@pytest.mark.parametrize(("distance", "n"), [(0.4, 5), (-0.2, 3), (1.5, 10)])
def test_one_sided_p_is_the_t_tail_at_the_standardised_distance(distance: float, n: int) -> None:
    s = 1.0
    h = _half(s, n)
    expected = float(stats.t.sf(distance / (s / math.sqrt(n)), n - 1))
    assert one_sided_p(h, distance, n, 0.95) == pytest.approx(expected, rel=1e-9)
    # an interval whose end sits exactly on the edge is a test at 2.5 %
    assert one_sided_p(h, h, n, 0.95) == pytest.approx(0.025, rel=1e-9)


def _exact_power(spread: float, distance: float, n: int, alpha: float = 0.025) -> float:
    """The power of the one-sided t-test at ``alpha`` when the truth lies ``distance`` past the edge: the noncentral
    t's tail beyond the critical value, noncentrality ``distance·√n/spread``."""
    critical = stats.t.ppf(1 - alpha, n - 1)
    return float(stats.nct.sf(critical, n - 1, distance * math.sqrt(n) / spread))


@pytest.mark.parametrize(
    ("spread", "distance", "power"),
    [(1.0, 0.5, 0.8), (0.03, 0.02, 0.8), (1.0, 2.0, 0.8), (0.05, 0.0953, 0.9), (0.2, 0.05, 0.95), (1.0, 3.0, 0.8)],
)
def test_seeds_for_power_is_within_one_seed_of_the_noncentral_t(spread: float, distance: float, power: float) -> None:
    n = seeds_for_power(spread, distance, power)
    assert n is not None and n >= 2
    exact = next(m for m in range(2, 10_000) if _exact_power(spread, distance, m) >= power)
    assert abs(n - exact) <= 1
    # its own criterion: n clears, n − 1 does not (unless n is the floor of 2)
    crit = (stats.t.ppf(0.975, n - 1) + stats.t.ppf(power, n - 1)) * spread / math.sqrt(n)
    assert crit < distance
    if n > 2:
        before = (stats.t.ppf(0.975, n - 2) + stats.t.ppf(power, n - 2)) * spread / math.sqrt(n - 1)
        assert before >= distance
    # planning for power needs more seeds than an interval that merely clears the distance
    assert n >= (seeds_for_spread(spread, distance) or 0)


def test_seeds_for_power_edges() -> None:
    assert seeds_for_power(1.0, 0.0) is None and seeds_for_power(1.0, -0.1) is None
    assert seeds_for_power(1.0, 1e-4) is None  # past MAX_SEEDS
    assert seeds_for_power(0.0, 0.1, start=7) == 7  # no spread: the floor
    assert seeds_for_power(1.0, 0.5, 0.9) > seeds_for_power(1.0, 0.5, 0.8)  # type: ignore[operator]
    with pytest.raises(ValueError, match="power"):
        seeds_for_power(1.0, 0.5, power=1.0)


def test_a_skew_guarded_verdict_plans_from_the_plain_spread_and_the_guards_factor() -> None:
    # a paired difference claimed 0 ± 0.1 (the skew guard's test claim); per-seed differences 0.08 ± symmetric
    # spread at 5 seeds: the plain t-interval [0.060, 0.100) lies inside the band, the guarded one (both ends ×3.65,
    # G1 = 0) reaches past 0.1. The estimate is the smallest n at which the guarded interval of values with the
    # measured mean and spread clears the edge: fewer than reading the widened half-width as t·s/√n gives
    from test_skew_guard import CLAIM, UPPER

    from distrepro.claims.intervals import skew_factor, skew_guarded_t_interval
    from distrepro.claims.verdicts import judge_values

    diffs = [0.06, 0.07, 0.08, 0.09, 0.10]
    base = {s: 0.7 for s in range(5)}
    v = judge_values(CLAIM, {"fast": {s: 0.7 + d for s, d in enumerate(diffs)}, "base": base}, "plan")
    assert v.verdict == "INCONCLUSIVE" and v.plain_ci is not None and v.plain_ci[1] < UPPER < v.ci[1]  # type: ignore[index]
    mean, spread = 0.08, float(np.std(diffs, ddof=1))
    assert v.statistic == pytest.approx(mean) and v.seeds_needed is not None

    def clears(n: int) -> bool:  # n values with the measured mean and spread, symmetric (the guard widens both ends)
        z = np.linspace(-1.0, 1.0, n)
        _, hi, widened = skew_guarded_t_interval(mean + spread * z / np.std(z, ddof=1), 0.95)
        assert widened == "both"
        return hi < UPPER

    n = v.seeds_needed
    assert clears(n) and not clears(n - 1)
    assert n == seeds_to_clear(_half(spread, 5), UPPER - mean, 5, 0.95, guarded=True)
    assert skew_factor(n) * _half(spread, n) < UPPER - mean
    plain = seeds_to_clear(_half(spread, 5), UPPER - mean, 5, 0.95)
    misread = seeds_to_clear(skew_factor(5) * _half(spread, 5), UPPER - mean, 5, 0.95)
    assert plain is not None and misread is not None and plain < n < misread  # 6 < 13 < 35
    assert f"about {n} seeds in a new run" in v.reason and "skew guard's factor f(n)" in v.reason
