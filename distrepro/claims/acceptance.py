"""How a reproduced statistic is judged against a claim: the ``accept:`` block and its defaults.

Kept apart from the claim kinds (:mod:`distrepro.claims.schema`) because the rules are one concept:
which statistic over seeds, paired or not, which confidence interval, how many seeds, and the
band the interval must lie in. Defaults are chosen so that the interval *decides* the verdict
(``rule: ci``) and so that the interval has the coverage it claims at the few seeds a
reproduction can afford (Student t on the per-seed values for means and geometric means; see
:mod:`distrepro.claims.intervals`).
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Statistic = Literal["median", "mean", "geometric_mean", "olympic_mean"]
CiMethod = Literal["t", "signflip", "bca", "percentile"]
#: kinds whose statistic may be negative or zero (no geometric mean)
SIGNED = {"final_metric", "ordering", "non_inferiority"}
#: kinds compared with a baseline arm, paired by seed unless ``paired: false``
COMPARATIVE = ("speedup", "relative_improvement", "non_inferiority", "ordering")
#: fewest seeds a claim needs by default: with 5 the t-interval is 2.78·s/√5 wide, with 3 it is
#: 4.30·s/√3, so differences of a few accuracy points cannot be resolved with 3 seeds
DEFAULT_MIN_SEEDS = 5
#: fewest seeds at which a measured claim may be judged by its point statistic (``rule: point``) or by a
#: bootstrap interval: below it a point says nothing about the next seeds, and percentile/BCa intervals of a
#: handful of values cannot reach outside them and under-cover (Efron & Tibshirani 1993, ch. 14 and 22)
MIN_SEEDS_POINT_OR_BOOTSTRAP = 10


class Accept(BaseModel):
    """How the reproduced statistic is compared with the claimed value.

    The acceptance band is the claimed value (or range) widened by ``max(abs_tolerance,
    rel_tolerance·|claimed|)`` on each side; ``one_sided`` drops the bound on the "better" side, so
    a result better than claimed passes. ``rule: ci`` (default) asks the CI of the statistic to lie
    inside the band (PASS), entirely outside it (FAIL), or else INCONCLUSIVE: a point statistic
    from 5 seeds says nothing about whether 5 more would agree. ``rule: point`` judges the
    statistic itself (the CI is still shown).
    """

    model_config = ConfigDict(extra="forbid")

    statistic: Statistic | None = None  # default depends on the kind (geometric mean for ratios, else mean)
    paired: bool | None = None  # pair arms by seed; default True where arms are compared
    rel_tolerance: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    abs_tolerance: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    sided: Literal["two_sided", "one_sided"] = "two_sided"
    rule: Literal["point", "ci"] = "ci"
    ci: float = Field(default=0.95, gt=0, lt=1)
    ci_method: CiMethod | None = None  # default: t for a mean / geometric mean of one sample, else bca
    n_boot: int = Field(default=2000, ge=100, le=100_000)
    min_seeds: int | None = Field(default=None, ge=1)


def default_statistic(claim: Any) -> Statistic:
    """Geometric mean for ratios (AlgoPerf's choice for speedups) and for fractions, which are judged through
    their ratio (a log transform, :mod:`distrepro.claims.samples`); the mean for everything else: the statistics
    a t-interval is exact for (on logs where the noise is multiplicative), so the default CI has its stated
    coverage."""
    if claim.kind == "speedup" or (claim.kind == "relative_improvement" and claim.form in ("ratio", "fraction")):
        return "geometric_mean"
    return "mean"


def default_paired(claim: Any) -> bool:
    return claim.kind in COMPARATIVE


def default_ci_method(statistic: str, paired: bool, kind: str) -> CiMethod:
    """``t`` where the statistic is a mean (or geometric mean) of *one* sample of per-seed values:
    a paired comparison or a single arm. Unpaired comparisons and medians have no pivot: BCa."""
    one_sample = paired or kind in ("final_metric", "convergence")
    return "t" if one_sample and statistic in ("mean", "geometric_mean") else "bca"


def check_ci_method(claim: Any, paired: bool) -> str | None:
    """Why ``claim.accept.ci_method`` cannot be used with its statistic, or None."""
    acc = claim.accept
    if acc.ci_method not in ("t", "signflip"):
        return None
    name = acc.ci_method
    if (acc.statistic or default_statistic(claim)) not in ("mean", "geometric_mean"):
        return f"ci_method {name} is an interval for a mean or geometric mean; use bca for a median or olympic mean"
    if not (paired or claim.kind in ("final_metric", "convergence")):
        return f"ci_method {name} needs one sample of per-seed values (a paired or single-arm claim); use bca"
    return None


def refused_below(claim: Any, n: int) -> str | None:
    """Why a measured claim's rule cannot judge ``n`` seeds (``rule: point`` or a bootstrap interval below
    :data:`MIN_SEEDS_POINT_OR_BOOTSTRAP`), or None. A claim decided by the model's structure is deterministic."""
    if claim.decided_by != "measurement" or n >= MIN_SEEDS_POINT_OR_BOOTSTRAP:
        return None
    acc = claim.accept
    if acc.rule == "point":
        what = "rule: point (a point statistic, no interval)"
    elif acc.ci_method in ("bca", "percentile"):
        what = f"a {acc.ci_method} bootstrap interval"
    else:
        return None
    return (
        f"claim {claim.id!r}: {what} is refused below {MIN_SEEDS_POINT_OR_BOOTSTRAP} seeds for a measured claim "
        f"(n={n}); judge it with rule: ci and a t or sign-flip interval on paired seeds, or run ≥ "
        f"{MIN_SEEDS_POINT_OR_BOOTSTRAP} seeds"
    )


def claimed_bounds(claimed: float | tuple[float, float] | None) -> tuple[float, float] | None:
    if claimed is None:
        return None
    if isinstance(claimed, tuple):
        return float(claimed[0]), float(claimed[1])
    return float(claimed), float(claimed)


def acceptance_band(claim: Any, higher_is_better: bool) -> tuple[float, float] | None:
    """The interval the statistic must fall in (see :class:`Accept`); ``None`` for kinds without one."""
    bounds = claimed_bounds(getattr(claim, "claimed", None))
    if bounds is None:
        return None
    lo, hi = bounds
    acc: Accept = claim.accept
    lo -= max(acc.abs_tolerance, acc.rel_tolerance * abs(lo))
    hi += max(acc.abs_tolerance, acc.rel_tolerance * abs(hi))
    if acc.sided == "one_sided":
        return (lo, math.inf) if higher_is_better else (-math.inf, hi)
    return lo, hi
