"""Confidence intervals at the seed counts a reproduction can afford: exact t quantiles, and coverage
measured by simulation (numpy only, a fraction of a second), so the README's figures stay true."""

from __future__ import annotations

import math

import numpy as np
import pytest

from distrepro.claims.intervals import bca_interval, percentile_interval, t_interval, t_quantile
from distrepro.claims.stats import stat

N_SAMPLES, N_SEEDS = 2000, 5


@pytest.mark.parametrize(
    ("df", "level", "value"),
    [  # two-sided critical values from any t table (e.g. NIST/SEMATECH e-Handbook, Table 1.3.6.7.2)
        (1, 0.95, 12.706),
        (2, 0.95, 4.303),
        (4, 0.95, 2.776),
        (4, 0.90, 2.132),
        (9, 0.99, 3.250),
        (30, 0.95, 2.042),
        (10_000, 0.95, 1.960),
    ],
)
def test_t_quantile_matches_the_table(df: int, level: float, value: float) -> None:
    assert t_quantile(level, df) == pytest.approx(value, abs=1e-3)


def _coverage(intervals: list[tuple[float, float]], truth: float) -> float:
    return float(np.mean([lo <= truth <= hi for lo, hi in intervals]))


def test_t_interval_covers_the_mean_at_the_stated_level_with_five_seeds() -> None:
    """2,000 samples of n = 5 from N(10, 2²): the 95% t-interval covers 10 in 93–97% of them
    (the binomial s.e. of the estimate is 0.5 points)."""
    samples = np.random.default_rng(20261121).normal(10.0, 2.0, size=(N_SAMPLES, N_SEEDS))
    assert 0.93 <= _coverage([t_interval(x, 0.95) for x in samples], 10.0) <= 0.97


def test_t_interval_on_log_ratios_covers_the_geometric_mean() -> None:
    """Speedups are ratios: lognormal per-seed ratios with median 2 (σ = 0.3 on the log scale)."""
    ratios = 2.0 * np.exp(np.random.default_rng(7).normal(0.0, 0.3, size=(N_SAMPLES, N_SEEDS)))
    assert 0.93 <= _coverage([t_interval(x, 0.95, log=True) for x in ratios], 2.0) <= 0.97
    assert all(math.isnan(b) for b in t_interval([1.0, -1.0, 2.0], 0.95, log=True))


def test_percentile_bootstrap_of_five_seeds_undercovers() -> None:
    """Why t is the default: the percentile bootstrap can never reach outside [min, max] of 5 values,
    and covers the mean of a normal in about 85% of samples, not 95% (BCa of the mean: the same)."""
    samples = np.random.default_rng(3).normal(10.0, 2.0, size=(400, N_SEEDS))

    def mean(s: list[np.ndarray]) -> np.ndarray:
        return stat(s[0], "mean")

    pct = _coverage([percentile_interval([x], mean, i, 1000, 0.95) for i, x in enumerate(samples)], 10.0)
    bca = _coverage([bca_interval([x], mean, i, 1000, 0.95) for i, x in enumerate(samples)], 10.0)
    assert 0.78 <= pct <= 0.91 and 0.78 <= bca <= 0.91


def test_bca_of_the_median_covers_the_median_of_five_seeds() -> None:
    """BCa is the fallback for medians: measured here at n = 5 (it lands near 95% because the
    median's bootstrap distribution is lumpy and the interval is close to [x(1), x(5)], whose exact
    coverage is 1 − 2·0.5⁵ = 93.75%)."""
    samples = np.random.default_rng(11).normal(10.0, 2.0, size=(400, N_SEEDS))

    def median(s: list[np.ndarray]) -> np.ndarray:
        return stat(s[0], "median")

    cover = _coverage([bca_interval([x], median, i, 1000, 0.95) for i, x in enumerate(samples)], 10.0)
    assert 0.88 <= cover <= 0.99


def test_t_interval_needs_two_values() -> None:
    assert all(math.isnan(b) for b in t_interval([3.0], 0.95))
    assert t_interval([3.0, 3.0, 3.0], 0.95) == (3.0, 3.0)  # no spread, no width: the clock had no noise
