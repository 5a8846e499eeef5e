"""Confidence intervals that mean something with 3 to 10 seeds.

A reproduction has few seeds, so the interval method matters more than the point statistic:

* **Student t** (default for means and geometric means): ``x̄ ± t_{n−1, 1−α/2} · s/√n`` on the
  per-seed values, on their logarithms for a geometric mean (ratios: speedups, FLOPS ratios),
  exponentiated back. Exact coverage when the per-seed values (log-values) are normal, and close
  to it for the mildly skewed ratios and accuracies of training runs; with n = 5 it is 2.78·s/√5
  wide, where the percentile bootstrap of 5 points can never be wider than [min, max] and covers
  the mean in about 80 % of normal samples (measured in ``tests/test_intervals.py``).
* **BCa bootstrap** (Efron 1987, "Better bootstrap confidence intervals", JASA 82(397)): for the
  median, the olympic mean and unpaired combinations, where no pivot exists. Bias correction from
  the share of resamples below the estimate, acceleration from the jackknife. It inherits the
  bootstrap's small-n narrowness (it cannot reach outside the resampled values), so its coverage
  at n = 5 is below nominal; the README gives the measured figure.
* **percentile** bootstrap: the previous default, kept for comparison.

Everything is numpy and the standard library, and every resampling generator is seeded by the
caller, so a report is bit-for-bit reproducible.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from statistics import NormalDist
from typing import Any

import numpy as np

_NORMAL = NormalDist()


def _t_two_sided_mass(t: float, df: int) -> float:
    """``P(|T| ≤ t)`` for Student's t with integer ``df`` (Abramowitz & Stegun 26.7.3 and 26.7.4).

    The finite series in θ = atan(t/√df) is exact for integer degrees of freedom, which is all a
    count of seeds gives; no special-function library is needed.
    """
    theta = math.atan(t / math.sqrt(df))
    s, c = math.sin(theta), math.cos(theta)
    if df % 2 == 1:
        if df == 1:
            return 2 * theta / math.pi
        term, total = c, c
        for k in range(3, df - 1, 2):  # c·(1 + 2/3 c² + 2·4/(3·5) c⁴ + …), df−2 powers
            term *= c * c * (k - 1) / k
            total += term
        return 2 / math.pi * (theta + s * total)
    term, total = 1.0, 1.0
    for k in range(2, df - 1, 2):  # 1 + 1/2 c² + 1·3/(2·4) c⁴ + …
        term *= c * c * (k - 1) / k
        total += term
    return s * total


def t_quantile(level: float, df: int) -> float:
    """The two-sided critical value: ``t`` with ``P(|T_df| ≤ t) = level`` (e.g. 2.776 for 0.95, df 4)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if df > 5000:  # the series grows with df; by here t is the normal quantile to 1e-4
        return _NORMAL.inv_cdf(0.5 + level / 2)
    lo, hi = 0.0, 1.0
    while _t_two_sided_mass(hi, df) < level:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if _t_two_sided_mass(mid, df) < level:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * hi:
            break
    return (lo + hi) / 2


def t_interval(values: Sequence[float] | np.ndarray, level: float, log: bool = False) -> tuple[float, float]:
    """Student-t CI for the mean of ``values`` (of their logs, exponentiated, when ``log``).

    NaN bounds when fewer than two values (no spread to estimate) or, with ``log``, a value ≤ 0.
    """
    x = np.asarray(values, dtype=float)
    if log:
        if np.any(x <= 0):
            return math.nan, math.nan
        x = np.log(x)
    n = x.size
    if n < 2 or not np.all(np.isfinite(x)):
        return math.nan, math.nan
    half = t_quantile(level, n - 1) * float(np.std(x, ddof=1)) / math.sqrt(n)
    lo, hi = float(np.mean(x)) - half, float(np.mean(x)) + half
    return (math.exp(lo), math.exp(hi)) if log else (lo, hi)


def _resample(samples: Sequence[np.ndarray], seed: int, n_boot: int) -> list[np.ndarray]:
    """``n_boot`` resamples of each sample, drawn independently (pairs stay together because a
    paired claim passes one sample of per-seed ratios or differences)."""
    rng = np.random.default_rng(seed)
    return [s[rng.integers(0, len(s), size=(n_boot, len(s)))] for s in samples]


def percentile_interval(
    samples: Sequence[np.ndarray], combine: Callable[[list[np.ndarray]], Any], seed: int, n_boot: int, level: float
) -> tuple[float, float]:
    """Percentile bootstrap: the α/2 and 1−α/2 quantiles of the resampled statistic."""
    dist = np.asarray(combine(_resample(samples, seed, n_boot)), dtype=float)
    dist = dist[np.isfinite(dist)]
    if dist.size == 0:
        return math.nan, math.nan
    lo, hi = np.quantile(dist, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


def _jackknife(samples: Sequence[np.ndarray], combine: Callable[[list[np.ndarray]], Any]) -> np.ndarray:
    """The statistic with each observation of each sample left out in turn (samples of size 1 are kept)."""
    out = []
    for i, s in enumerate(samples):
        if len(s) < 2:
            continue
        for j in range(len(s)):
            left = [np.delete(x, j) if k == i else x for k, x in enumerate(samples)]
            out.append(float(combine(left)))
    return np.asarray(out, dtype=float)


def bca_interval(
    samples: Sequence[np.ndarray],
    combine: Callable[[list[np.ndarray]], Any],
    seed: int,
    n_boot: int,
    level: float,
) -> tuple[float, float]:
    """Bias-corrected and accelerated bootstrap CI (Efron 1987; Efron & Tibshirani 1993, §14.3).

    ``z0`` = Φ⁻¹(share of resamples below the estimate, ties counted half); ``a`` from the
    jackknife's skewness. Falls back to the percentile interval where either is undefined (every
    resample equal to the estimate, or no jackknife spread).
    """
    point = float(combine(list(samples)))
    dist = np.asarray(combine(_resample(samples, seed, n_boot)), dtype=float)
    dist = dist[np.isfinite(dist)]
    if dist.size == 0 or not math.isfinite(point):
        return math.nan, math.nan
    below = (np.sum(dist < point) + 0.5 * np.sum(dist == point)) / dist.size
    if not 0 < below < 1:
        lo, hi = np.quantile(dist, [(1 - level) / 2, 1 - (1 - level) / 2])
        return float(lo), float(hi)
    z0 = _NORMAL.inv_cdf(float(below))
    jack = _jackknife(samples, combine)
    jack = jack[np.isfinite(jack)]
    diffs = jack.mean() - jack if jack.size else np.zeros(0)
    denom = float(np.sum(diffs**2)) ** 1.5
    a = float(np.sum(diffs**3)) / (6 * denom) if denom > 0 else 0.0
    quantiles = []
    for alpha in ((1 - level) / 2, 1 - (1 - level) / 2):
        z = _NORMAL.inv_cdf(alpha)
        shifted = z0 + (z0 + z) / (1 - a * (z0 + z))
        quantiles.append(min(max(_NORMAL.cdf(shifted), 0.0), 1.0))
    lo, hi = np.quantile(dist, quantiles)
    return float(lo), float(hi)


CI_LABELS = {
    "t": "Student-t interval",
    "bca": "BCa bootstrap interval",
    "percentile": "percentile bootstrap interval",
}
