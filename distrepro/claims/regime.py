"""Regime conditions: is a claim's proxy in the regime where the paper's effect can show at all?

A proxy too small to exhibit a paper's effect (a model that saturates, a run too short for Adam's
moments to refresh, consensus distances at floating-point noise) decides nothing about the paper,
and a FAIL from it misleads as much as a false PASS. So a claim may declare ``regime:`` conditions
in ``paper.yaml``, each taken from the paper's own setting (``source``), fixed before the runs and
measured on the very runs that decide the claim. They are checked *before* the confidence interval:
one unmet condition makes the verdict INCONCLUSIVE with the reason "outside the paper's regime:
<condition>, measured <value>", and the report lists every check and tallies such verdicts apart.

Three checks, a closed set like the claim kinds:

* ``metric``: a statistic over the seeds (``min`` by default for ``at_least``, ``max`` for
  ``at_most``: every seed must be in the regime) of a metric one arm logged, against a bound;
* ``control``: a positive control, the paper's reference ordering between two arms (``arms: [a, b]``:
  ``a`` at least as good as ``b`` on ``metric`` in the mean over paired seeds, within ``margin``);
  when the reference ordering fails, the proxy is not where the paper is and an ordering between
  the arms under test says nothing;
* ``detectable``: a *planning figure*, not a gate: the half-width of the t-interval of the claim's
  paired per-seed values beside the paper's ``effect`` (default: the claimed value), with the seeds
  that would resolve that effect (:mod:`distrepro.claims.planning`). It is printed and never changes a
  verdict: an interval wholly beyond the band is evidence whatever its width, and gating on the
  observed spread keeps just the samples whose spread happens to be small, on which the interval
  under-covers (the post-hoc power fallacy; Hoenig & Heisey, The American Statistician 55(1), 2001).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from distrepro.claims.intervals import t_quantile
from distrepro.claims.stats import fmt

Check = Literal["metric", "control", "detectable"]
OUTSIDE = "outside the paper's regime"


class RegimeCondition(BaseModel):
    """One condition of a claim's ``regime:`` list (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
    what: str = Field(min_length=1)  # the condition in words, e.g. "H grows past 10 x H_base"
    source: str = Field(min_length=1)  # the paper's setting it comes from (section, table, recipe)
    check: Check = "metric"
    metric: str | None = None
    arm: str | None = None  # metric: the arm measured (default: the claim's arm, the first of an ordering)
    arms: list[str] | None = None  # control: [reference-better, reference-worse]
    direction: Literal["max", "min"] = "max"  # control: which way is better on the metric
    statistic: Literal["min", "max", "mean"] | None = None
    at_least: float | None = Field(default=None, allow_inf_nan=False)
    at_most: float | None = Field(default=None, allow_inf_nan=False)
    margin: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    effect: float | None = Field(default=None, gt=0, allow_inf_nan=False)  # detectable: the paper's effect

    @model_validator(mode="after")
    def _fields_of_check(self) -> RegimeCondition:
        if self.check == "metric":
            if self.metric is None:
                raise ValueError("a metric condition needs 'metric'")
            if (self.at_least is None) == (self.at_most is None):
                raise ValueError("a metric condition needs exactly one of 'at_least' and 'at_most'")
        elif self.check == "control":
            if self.metric is None or not self.arms or len(self.arms) != 2 or self.arms[0] == self.arms[1]:
                raise ValueError("a control condition needs 'metric' and two different 'arms' [better, worse]")
        elif self.metric is not None or self.arms is not None or self.at_least is not None or self.at_most is not None:
            raise ValueError("a detectable condition takes only 'effect' (default: the claimed value)")
        return self


@dataclass
class RegimeCheck:
    """The outcome of one condition on the deciding runs: ``met`` is None when it could not be measured."""

    id: str
    what: str
    source: str
    required: str
    measured: float | None
    met: bool | None
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if self.measured is not None and not math.isfinite(self.measured):
            out["measured"] = None
        return out

    def text(self) -> str:
        value = "not measured" if self.measured is None else f"measured {fmt(self.measured)}"
        state = {True: "met", False: "NOT met", None: "unknown"}[self.met]
        if self.detail.startswith("planning figure"):
            state = "below the effect" if self.met else "not below the effect"
        return f"{self.what} ({self.required}): {value}, {state}" + (f"; {self.detail}" if self.detail else "")


def condition_arms(claim: Any, cond: RegimeCondition) -> list[str]:
    """The arms a condition reads (for reference checks and for gathering runs)."""
    if cond.check == "control":
        return list(cond.arms or [])
    if cond.check == "metric":
        return [cond.arm or _claim_arm(claim)]
    return []


def _claim_arm(claim: Any) -> str:
    return str(claim.arms[0] if claim.kind == "ordering" else claim.arm)


def _seed_stat(values: dict[int, float], statistic: str) -> float:
    x = np.array(list(values.values()), dtype=float)
    if statistic == "min":
        return float(x.min())
    return float(x.max()) if statistic == "max" else float(x.mean())


def check_metric(cond: RegimeCondition, arm: str, values: dict[int, float] | None) -> RegimeCheck:
    """``values`` per seed of ``cond.metric`` on ``arm``, or None when the arm did not log it."""
    above = cond.at_least is not None
    bound = float(cond.at_least if above else cond.at_most)  # type: ignore[arg-type]
    statistic = cond.statistic or ("min" if above else "max")
    required = f"{statistic} over seeds of {cond.metric} on '{arm}' {'≥' if above else '≤'} {fmt(bound)}"
    if not values:
        return RegimeCheck(cond.id, cond.what, cond.source, required, None, None, f"{cond.metric} was not logged")
    measured = _seed_stat(values, statistic)
    met = measured >= bound if above else measured <= bound
    return RegimeCheck(cond.id, cond.what, cond.source, required, measured, met)


def check_control(
    cond: RegimeCondition, better: dict[int, float] | None, worse: dict[int, float] | None
) -> RegimeCheck:
    """Mean over paired seeds of (better - worse), signed by ``direction``, must be ≥ −margin."""
    a, b = cond.arms or ["", ""]
    required = f"'{a}' at least as good as '{b}' on {cond.metric} (mean paired gap ≥ −{fmt(cond.margin)})"
    seeds = sorted(set(better or {}) & set(worse or {}))
    if not seeds:
        return RegimeCheck(cond.id, cond.what, cond.source, required, None, None, "no seed with both arms' values")
    sign = 1.0 if cond.direction == "max" else -1.0
    gap = float(np.mean([sign * (better[s] - worse[s]) for s in seeds]))  # type: ignore[index]
    return RegimeCheck(cond.id, cond.what, cond.source, required, gap, gap >= -cond.margin)


def check_detectable(
    cond: RegimeCondition, points: dict[int, float], effect: float | None, level: float
) -> RegimeCheck:
    """The half-width of the t-interval of the claim's per-seed values against the paper's effect (reported,
    never a gate: :func:`first_unmet` skips it)."""
    size = cond.effect if cond.effect is not None else effect
    required = f"t-interval half-width of the paired values < {fmt(size)}" if size is not None else "an effect size"
    x = np.array(list(points.values()), dtype=float)
    if size is None or x.size < 2 or not np.all(np.isfinite(x)):
        why = "no effect size (set 'effect')" if size is None else "fewer than two finite per-seed values"
        return RegimeCheck(cond.id, cond.what, cond.source, required, None, None, why)
    spread = float(np.std(x, ddof=1))
    half = t_quantile(level, x.size - 1) * spread / math.sqrt(x.size)
    from distrepro.claims.planning import seeds_for_spread

    seeds = seeds_for_spread(spread, abs(size), level)
    plan = f"about {seeds} seeds resolve an effect of {fmt(abs(size))}" if seeds else "no seed count resolves it"
    detail = f"planning figure, not a gate: {plan} (n ≈ (t·s/effect)²)"
    return RegimeCheck(cond.id, cond.what, cond.source, required, half, half < abs(size), detail)


def run_checks(claim: Any, values_of: Callable[[str, str], dict[int, float] | None]) -> list[RegimeCheck]:
    """The ``metric`` and ``control`` conditions of ``claim``, measured with ``values_of(arm, metric)``
    (per seed, the deciding runs' values; None when the arm did not log the metric). ``detectable``
    conditions need the claim's per-seed values and are checked by :func:`check_detectable`."""
    checks = []
    for cond in claim.regime:
        if cond.check == "metric":
            arm = condition_arms(claim, cond)[0]
            checks.append(check_metric(cond, arm, values_of(arm, cond.metric)))
        elif cond.check == "control":
            a, b = condition_arms(claim, cond)
            checks.append(check_control(cond, values_of(a, cond.metric), values_of(b, cond.metric)))
    return checks


def first_unmet(checks: list[RegimeCheck]) -> str | None:
    """The INCONCLUSIVE reason for the first condition not met or not measurable, or None when all hold."""
    for c in checks:
        if c.detail.startswith("planning figure"):
            continue
        if c.met is False:
            return f"{OUTSIDE}: {c.what}, measured {fmt(c.measured)} (needs {c.required}; {c.source})"
        if c.met is None:
            return f"{OUTSIDE} cannot be established: {c.what}: {c.detail} (needs {c.required})"
    return None
