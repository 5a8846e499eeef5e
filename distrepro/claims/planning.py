"""How many seeds an interval needs to clear an edge, and the one-sided p-value of a decision.

One computation serves two moments. *Before the runs*, a pilot's per-seed spread ``s`` (on seeds that
are then discarded) and the smallest distance worth resolving ``d`` (a margin, half the paper's gap)
give the seeds to plan for: the smallest n with ``t_{n−1, 1−α/2} · s / √n < d``, i.e. n ≈ (t·s/d)²
solved with the t quantile of that n (:func:`seeds_for_spread`); planned for power, the smallest n with
``(t_{n−1, 1−α} + t_{n−1, power}) · s / √n < d`` at the verdicts' one-sided α = 2.5 % (:func:`seeds_for_power`,
what ``distrepro preregister --pilot`` uses: :mod:`distrepro.claims.pilot`). *After the runs*, an interval that
straddles an edge gives the same figure from its own half-width ``h`` at n seeds: the spread it implies
is ``s = h·√n / t_{n−1}`` (:func:`seeds_to_clear`). That second figure is a plan for a *new*
confirmatory run, not a licence to add seeds and look again (two looks at the nominal level err more
often than 2.5 %; a group-sequential plan or fresh seed indices avoid it).

**Under the skew guard.** A ``t`` interval is skew-guarded (:func:`distrepro.claims.intervals.skew_guarded_t_interval`):
an end not measurably skewed away is ``f(n)·t·s/√n`` from the mean (3.65·t·s/√5 at 5 seeds), so its half-width
does not imply the spread ``h·√n/t``; read so, the spread is f(n) times too large and the seeds (f(n))² times too
many. The plan takes the spread from the *plain* t-interval of the same values and searches the smallest n with
``t_{n−1}·f(n)·s/√n < d`` (``guarded=True``): the interval of the new run is guarded too, and f(n) falls towards 1
as n grows (:data:`~distrepro.claims.intervals.SKEW_FACTOR`), so the figure lies between the plain one and the
misread one (at s = 0.0158, d = 0.01 and 5 seeds: plain 13, guarded 30, misread 131). It assumes the new run's
end is widened (its values not measurably skewed away from the edge), which the guard does unless they are.

Everything is on the interval's own scale: the log scale for a geometric mean (ratios, speedups),
the log-ratio scale for a fraction judged through its ratio (see :mod:`distrepro.claims.samples`).
Bootstrap and sign-flip intervals are read through the same t approximation (their half-width stands
in for ``t·s/√n``), which the report says.
"""

from __future__ import annotations

import math

from distrepro.claims.intervals import skew_factor, t_quantile

#: give up beyond this many seeds: a distance that small is not worth resolving by seeds
MAX_SEEDS = 100_000


def seeds_for_spread(
    spread: float, distance: float, level: float = 0.95, start: int = 2, guarded: bool = False
) -> int | None:
    """Smallest n ≥ ``start`` with ``t_{n−1}(level) · spread / √n < distance`` (times the skew guard's ``f(n)`` when
    ``guarded``: the half-width of a skew-guarded interval's widened end); None when the distance is 0 or more than
    :data:`MAX_SEEDS` would be needed. ``spread`` is the per-seed standard deviation."""
    if not (math.isfinite(spread) and math.isfinite(distance)) or distance <= 0:
        return None
    if spread <= 0:
        return max(start, 2)
    n = max(start, 2, math.ceil((1.959963984540054 * spread / distance) ** 2))  # the normal bound: t·f is larger
    while n <= MAX_SEEDS:
        factor = skew_factor(n) if guarded else 1.0
        if factor * t_quantile(level, n - 1) * spread / math.sqrt(n) < distance:
            return n
        n += 1 if n < 1000 else max(1, n // 100)
    return None


def seeds_for_power(
    spread: float, distance: float, power: float = 0.8, alpha: float = 0.025, start: int = 2
) -> int | None:
    """Smallest n ≥ ``start`` with ``(t_{n−1, 1−α} + t_{n−1, power}) · spread / √n < distance``: the seeds at
    which a one-sided test at ``alpha`` (a 95 % interval's end, α = 2.5 %) clears an edge ``distance`` away from
    the true value with probability about ``power``. The usual t approximation of the noncentral-t power (Julious,
    "Sample sizes for clinical trials with Normal data", Stat. Med. 23(12), 2004); it agrees with the exact power
    within a seed (``tests/claims/test_planning.py``). None when the distance is 0 or :data:`MAX_SEEDS` would not
    do."""
    from scipy.special import ndtri, stdtrit  # the normal and t quantiles, as scipy.stats evaluates them

    if not (math.isfinite(spread) and math.isfinite(distance)) or distance <= 0:
        return None
    if not (0 < alpha < 0.5 and 0.5 <= power < 1):
        raise ValueError(f"need 0 < alpha < 0.5 and 0.5 <= power < 1, got alpha={alpha}, power={power}")
    if spread <= 0:
        return max(start, 2)

    def clears(n: int) -> bool:
        return float(stdtrit(n - 1, 1 - alpha) + stdtrit(n - 1, power)) * spread / math.sqrt(n) < distance

    normal = float(ndtri(1 - alpha) + ndtri(power))  # the normal bound: the t quantiles are larger
    n = max(start, 2, math.ceil((normal * spread / distance) ** 2))
    while n <= MAX_SEEDS:
        if clears(n):
            return n
        n += 1 if n < 1000 else max(1, n // 100)
    return None


def implied_spread(half: float, n: int, level: float) -> float:
    """The per-seed spread a t-interval of half-width ``half`` at ``n`` seeds implies: ``half·√n / t_{n−1}``."""
    return half * math.sqrt(n) / t_quantile(level, n - 1)


def seeds_to_clear(half: float, distance: float, n: int, level: float, guarded: bool = False) -> int | None:
    """Seeds an interval of half-width ``half`` (towards the edge) at ``n`` seeds would need for that half-width
    to fall below ``distance`` (the statistic's distance to the edge), the spread held at its estimate. For a
    skew-guarded t-interval (``guarded``), ``half`` is the *plain* t-interval's half-width (the spread it implies
    is the per-seed spread) and the new run's half-width carries the guard's factor f(n) (module docstring)."""
    if n < 2 or not math.isfinite(half):
        return None
    return seeds_for_spread(implied_spread(half, n, level), distance, level, start=n + 1, guarded=guarded)


def one_sided_p(half: float, distance: float, n: int, level: float) -> float:
    """One-sided p-value of "the edge is not crossed" for a statistic ``distance`` beyond an edge (negative:
    short of it), from an interval of half-width ``half`` at ``n`` seeds: ``P(T_{n−1} ≥ t·distance/half)``."""
    from scipy.special import stdtr  # the t distribution's CDF, as scipy.stats.t.sf evaluates it

    if n < 2 or not math.isfinite(half) or not math.isfinite(distance):
        return math.nan
    if half <= 0:
        return 0.0 if distance > 0 else 1.0
    return float(stdtr(n - 1, -t_quantile(level, n - 1) * distance / half))


def how_computed() -> str:
    """The sentence a report prints beside a seeds figure."""
    return (
        "n ≈ (t·s/d)²: the smallest n with t_{n−1}·s/√n below the distance d from the statistic to the edge, "
        "s the per-seed spread the interval implies (half-width·√n/t), on the interval's scale; for a skew-guarded "
        "t-interval, s from the plain t-interval and t·f(n)·s/√n, f(n) the guard's factor at that n"
    )
