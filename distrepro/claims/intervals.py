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
* **sign-flip** (randomisation) interval for the mean of paired differences: exact for any
  distribution symmetric about its centre (heavy tails included), whatever n. It is the set of
  centres the sign-flip test does not reject, whose ends are order statistics of the 2^n − 1
  subset means (Hartigan 1969, "Using subsample values as typical values", JASA 64(328)). With
  n = 5 only 32 sign patterns exist, so the smallest one-sided p is 1/32 > 2.5 %: a 95 % interval
  needs at least 6 seeds to be bounded at all. Symmetry is its assumption: under skewed per-seed
  values it errs as the t-interval does (measured in ``tests/claims/test_verdict_rule_calibration.py``).

**The skew guard** (on every ``t`` interval a claim is judged by: :func:`skew_guarded_t_interval`). Under a
right-skewed per-seed distribution the t-interval's *upper* end is too short (the mean and the spread of a sample
are positively correlated: a sample that missed the long tail is both low and tight), so "the mean lies below an
edge" errs far above 2.5 %: at n = 5, 11 % under exponential noise and 18 % under lognormal noise of log-sd 1
(skewness 6.2); a left skew does the same to the lower end. Skew corrections driven by the sample skewness do not
repair it at these seed counts: Johnson's modified t (Johnson 1978, "Modified t tests and confidence intervals for
asymmetrical populations", JASA 73(363)) shifts the interval by ``G1·s/(6n)``, 1/30 of a half-width at n = 5, and
Hall's transformation of the studentized mean (Hall 1992, "On the removal of skewness by transformation", JRSS B
54(1); the interval of Zhou & Dinh 2005, Biostatistics 6(2)) leaves 10.6 % (lognormal) and 6.6 % (exponential) at
n = 5 while costing a fifth of the power on normal data (measured while writing the guard, 100 000 samples per
cell). The reason is that the samples on which the t-interval errs (the ones that missed the tail) are not
measurably skewed: their G1 spans −0.6 to 1.7, and G1 of 5 normal values has a standard deviation of 0.91. So the
guard is a calibrated widening, not a correction: an end is kept at ``x̄ ± t·s/√n`` only when the values are
measurably skewed *away* from it (the upper end when ``G1 ≤ −SKEW_G1``, the lower end when ``G1 ≥ SKEW_G1``, G1
the adjusted sample skewness on the interval's scale); otherwise it is ``x̄ ± f(n)·t·s/√n``, with the factor
``f(n)`` (:data:`SKEW_FACTOR`) the smallest that holds the one-sided error of that end to 4 % (below twice nominal,
with room for the sampling error of a check) at the interval's 95 % under centred exponential, lognormal (log-sd 1)
and χ²₁ noise, measured by simulation (``benchmarks/verdict_rule_calibration.py`` prints the verdict rule's rates;
``tests/claims/test_verdict_rule_calibration.py`` asserts them). It costs power: a band edge 1.5 per-seed sd away is
cleared by 23 % of 5-seed samples instead of 71 % (normal noise), 3 sd away by 46 % instead of all; at 10 seeds 63 %
and 100 %; from 15 seeds on almost nothing. No finite factor holds lognormal noise at n = 3 (G1 of 3 values carries
almost no information; a factor of 6 still leaves 6 %, and a 3-seed interval 6 times a t-interval's width says
nothing), so the guard starts at 4 values and a 3-seed t-interval stays plain: below the default ``min_seeds`` of
5, a claim that lowers it to 3 accepts the t-interval's error under skew (16 % under lognormal noise). That is
the price of a mean from 5 seeds whose noise may be skewed; a claim whose
noise is multiplicative is better judged on logs (a geometric mean), where the guard rarely bites far from an edge.
The factor was calibrated at 95 %; another level uses the same factor on its own t quantile.

The t quantile and the bootstrap are ``scipy.stats``' (``t.ppf``, ``bootstrap``); every resampling
generator is seeded by the caller, so a report is bit-for-bit reproducible.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


@functools.lru_cache(maxsize=4096)
def t_quantile(level: float, df: int) -> float:
    """The two-sided critical value: ``t`` with ``P(|T_df| ≤ t) = level`` (e.g. 2.776 for 0.95, df 4).

    ``scipy.special.stdtrit``, the function ``scipy.stats.t.ppf`` evaluates, called directly and cached: the
    verdict rule asks for a handful of (level, df) pairs thousands of times (seeds to clear an edge, the
    calibration test), and the distribution object's argument checks cost 100× the quantile."""
    from scipy.special import stdtrit

    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    return float(stdtrit(df, 0.5 + level / 2))


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


#: an end of the t-interval is kept unwidened only when the values are measurably skewed away from it (|G1| ≥ this)
SKEW_G1 = 0.5
#: n → the factor f(n) on the t half-width of a guarded end (see the module docstring); between entries the smaller
#: n's factor (the larger), beyond the last ``1 + 3.2/√n`` (which meets it at 40)
SKEW_FACTOR = {
    4: 5.45, 5: 3.65, 6: 2.95, 7: 2.62, 8: 2.40, 9: 2.24, 10: 2.14, 11: 2.08, 12: 2.02, 13: 1.98,
    14: 1.96, 15: 1.90, 20: 1.80, 25: 1.70, 30: 1.62, 40: 1.52,
}  # fmt: skip


def skew_factor(n: int) -> float:
    """The widening factor f(n) of a guarded end (1 below 4 values: see the module docstring)."""
    if n < min(SKEW_FACTOR):
        return 1.0
    if n > max(SKEW_FACTOR):
        return 1 + 3.2 / math.sqrt(n)
    return SKEW_FACTOR[max(k for k in SKEW_FACTOR if k <= n)]


def skew_guarded_bounds(x: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """The skew-guarded t-interval of each row of ``x`` (``(..., n)``, n ≥ 4, on the interval's scale), vectorised:
    what :func:`skew_guarded_t_interval` computes for one row (the calibration's Monte Carlo uses it)."""
    from distrepro.claims.stats import skewness_rows

    n = x.shape[-1]
    mean, sd = x.mean(axis=-1), x.std(axis=-1, ddof=1)
    t = t_quantile(level, n - 1) * sd / math.sqrt(n)
    g1 = skewness_rows(x)
    f = skew_factor(n)
    hi = mean + np.where(g1 > -SKEW_G1, f, 1.0) * t
    lo = mean - np.where(g1 < SKEW_G1, f, 1.0) * t
    return lo, hi


def skew_guarded_t_interval(
    values: Sequence[float] | np.ndarray, level: float, log: bool = False
) -> tuple[float, float, str]:
    """The t-interval with the skew guard (module docstring): ``(lo, hi, widened)``, ``widened`` naming the ends
    taken at ``f(n)·t·s/√n`` ("upper", "lower", "both" or "" when none was)."""
    from distrepro.claims.stats import skewness

    x = np.asarray(values, dtype=float)
    lo, hi = t_interval(x, level, log=log)
    if not (math.isfinite(lo) and math.isfinite(hi)) or x.size < min(SKEW_FACTOR) or lo == hi:
        return lo, hi, ""
    y = np.log(x) if log else x
    g1 = skewness(y)
    if not math.isfinite(g1):
        return lo, hi, ""
    n = y.size
    half = skew_factor(n) * t_quantile(level, n - 1) * float(np.std(y, ddof=1)) / math.sqrt(n)
    mean = float(np.mean(y))
    upper, lower = g1 > -SKEW_G1, g1 < SKEW_G1
    back = math.exp if log else float
    if upper:
        hi = back(mean + half)
    if lower:
        lo = back(mean - half)
    return lo, hi, "both" if upper and lower else ("upper" if upper else ("lower" if lower else ""))


def _bootstrap(
    samples: Sequence[np.ndarray],
    combine: Callable[[list[np.ndarray]], Any],
    seed: int,
    n_boot: int,
    level: float,
    method: str,
) -> tuple[tuple[float, float], np.ndarray]:
    """``scipy.stats.bootstrap`` of ``combine`` (the interval, and the resampled statistic).

    Each sample is resampled on its own (``paired=False``): a paired claim passes one sample of seed
    indices, so its pairs stay together. The generator is seeded by the caller, so a report is
    reproducible; scipy draws ``integers(0, n, (n_boot, n))`` per sample in order, one batch.
    Degenerate data (every resample equal, no jackknife spread) give NaN bounds and a scipy
    warning, which the callers replace by their own fallback, so the warning is silenced here.
    """
    from scipy.stats import bootstrap

    def statistic(*data: np.ndarray, axis: int = -1) -> Any:
        return combine(list(data))

    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore")
        res = bootstrap(
            tuple(samples),
            statistic,
            n_resamples=n_boot,
            confidence_level=level,
            method=method,
            rng=np.random.default_rng(seed),
            vectorized=True,
            paired=False,
        )
    ci = res.confidence_interval
    return (float(ci.low), float(ci.high)), np.asarray(res.bootstrap_distribution, dtype=float)


def _quantiles(dist: np.ndarray, level: float) -> tuple[float, float]:
    dist = dist[np.isfinite(dist)]
    if dist.size == 0:
        return math.nan, math.nan
    lo, hi = np.quantile(dist, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


def percentile_interval(
    samples: Sequence[np.ndarray], combine: Callable[[list[np.ndarray]], Any], seed: int, n_boot: int, level: float
) -> tuple[float, float]:
    """Percentile bootstrap: the α/2 and 1−α/2 quantiles of the resampled statistic (resamples where the
    statistic is undefined, e.g. a geometric mean of a value ≤ 0, are left out)."""
    _, dist = _bootstrap(samples, combine, seed, n_boot, level, "percentile")
    return _quantiles(dist, level)


def bca_interval(
    samples: Sequence[np.ndarray],
    combine: Callable[[list[np.ndarray]], Any],
    seed: int,
    n_boot: int,
    level: float,
) -> tuple[float, float]:
    """Bias-corrected and accelerated bootstrap CI (Efron 1987; Efron & Tibshirani 1993, §14.3), by
    ``scipy.stats.bootstrap(method="BCa")``.

    ``z0`` = Φ⁻¹(share of resamples below the estimate, ties counted half); ``a`` from the jackknife,
    summed over the samples (Efron & Tibshirani eq. 15.36, scipy's definition). Where scipy cannot
    compute it (every resample equal to the estimate, no jackknife spread, or a resample whose
    statistic is undefined), the percentile interval of the defined resamples stands in.
    """
    point = float(combine(list(samples)))
    if not math.isfinite(point):
        return math.nan, math.nan
    (lo, hi), dist = _bootstrap(samples, combine, seed, n_boot, level, "BCa")
    if np.all(np.isfinite(dist)) and math.isfinite(lo) and math.isfinite(hi):
        return lo, hi
    return _quantiles(dist, level)


#: enumerate every sign pattern up to this many seeds (2^16 subset means); draw that many beyond it
_EXACT_SIGNFLIP = 16


def signflip_interval(values: Sequence[float] | np.ndarray, level: float, seed: int = 0) -> tuple[float, float]:
    """Sign-flip (randomisation) CI for the centre of ``values`` (paired differences), two-sided ``level``.

    The ordered subset means m_(1) ≤ … ≤ m_(2^n − 1) cut the line into 2^n pieces that each hold the
    centre with probability 2^−n under symmetry (Hartigan 1969), so [m_(k), m_(2^n − k)] with
    k = ⌊2^n · (1 − level)/2⌋ covers it with probability 1 − 2k/2^n ≥ level. k = 0 (fewer than 6
    seeds at 95 %) leaves the interval unbounded: (−∞, ∞). Beyond 16 seeds the subsets are drawn at
    random from a generator seeded by the caller (a Monte Carlo version of the same interval).
    """
    x = np.asarray(values, dtype=float)
    n = x.size
    if n < 2 or not np.all(np.isfinite(x)):
        return math.nan, math.nan
    if n <= _EXACT_SIGNFLIP:
        masks = (np.arange(1, 2**n)[:, None] >> np.arange(n)) & 1
        total = 2**n
    else:
        rng = np.random.default_rng(seed)
        masks = rng.integers(0, 2, size=(2**_EXACT_SIGNFLIP, n))
        masks = masks[masks.any(axis=1)]
        total = masks.shape[0] + 1
    means = np.sort((masks @ x) / masks.sum(axis=1))
    k = math.floor(total * (1 - level) / 2 + 1e-12)
    if k < 1:
        return -math.inf, math.inf
    return float(means[k - 1]), float(means[-k])


CI_LABELS = {
    "t": "Student-t interval",
    "signflip": "sign-flip (randomisation) interval",
    "bca": "BCa bootstrap interval",
    "percentile": "percentile bootstrap interval",
}
