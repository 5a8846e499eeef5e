"""Group-sequential judging: the interval level that keeps the error of a verdict at 2.5 % when seeds are added.

Looking at 5 seeds, then at 10 if the first look was undecided, and judging both looks with a 95 % interval lets
a false PASS through about 4.4 % of the time instead of 2.5 % (two chances to cross the same edge). A plan
declared before the runs fixes this: Pocock (Biometrika 64, 1977) uses one constant boundary ``c`` at every look,
chosen so that the probability of crossing it at *any* look is alpha under the null. With the one-sided
alpha = 2.5 % and looks at 5 and 10 seeds, c = 2.178 and each look is judged with a two-sided
1 - 2(1 - Phi(c)) = 97.06 % interval (the "about 97.3 %" of the t-based simulations, same idea).

The boundary is computed from the looks' information fractions (n_k / n_K) by the recursive numerical
integration of Armitage, McPherson and Rowe (J. R. Statist. Soc. A 132, 1969) on the score process, a normal
approximation; the verdict code then applies the level to its usual t-interval, which is slightly more
conservative at these n. The plan is declared in the scale's pre-registration record
(:mod:`distrepro.claims.preregistration`) and applied by :func:`apply_plan` before any claim is judged.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

#: one-sided error each decision carries (a 95 % two-sided interval's lower or upper edge)
ONE_SIDED_ALPHA = 0.025
_GRID = 1601  # points of the score grid: the boundary is within 0.002 of the tabulated values (tests)
_SPAN = 8.0  # the grid covers +-8 standard deviations of the score at the last look


class _Looks:
    """The score grid and the transition kernels between looks, built once per plan (they do not depend on the
    boundary being searched for)."""

    def __init__(self, fractions: Sequence[float]) -> None:
        self.t = np.asarray(fractions, dtype=float)
        self.x = np.linspace(-_SPAN, _SPAN, _GRID)  # the score S(t_k); Z_k = S / sqrt(t_k)
        self.dx = float(self.x[1] - self.x[0])
        diff = self.x[:, None] - self.x[None, :]
        self.kernels = [
            np.exp(-(diff**2) / (2 * (b - a))) / math.sqrt(2 * math.pi * (b - a)) * self.dx
            for a, b in zip(self.t[:-1], self.t[1:], strict=True)
        ]

    def crossing_probability(self, c: float) -> float:
        """P(Z_k > c at some look k) under the null: one minus the mass kept below every boundary."""
        x, t = self.x, self.t
        density = np.exp(-(x**2) / (2 * t[0])) / math.sqrt(2 * math.pi * t[0])
        density[x > c * math.sqrt(t[0])] = 0.0
        for kernel, now in zip(self.kernels, t[1:], strict=True):
            density = kernel @ density
            density[x > c * math.sqrt(now)] = 0.0
        return float(1.0 - density.sum() * self.dx)


def pocock_boundary(looks: Sequence[int], alpha: float = ONE_SIDED_ALPHA) -> float:
    """The constant z-boundary crossed at any of ``looks`` (seed counts, increasing) with probability ``alpha``."""
    if len(looks) < 1 or any(b <= a for a, b in itertools.pairwise(looks)) or looks[0] < 2:
        raise ValueError(f"looks must be increasing seed counts of at least 2, got {list(looks)}")
    grid = _Looks([n / looks[-1] for n in looks])
    lo, hi = 1.0, 5.0
    for _ in range(30):  # bisection to 4e-9: the crossing probability falls as the boundary rises
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if grid.crossing_probability(mid) > alpha else (lo, mid)
    return (lo + hi) / 2


def pocock_level(looks: Sequence[int], alpha: float = ONE_SIDED_ALPHA) -> float:
    """The two-sided interval level to judge every look with: 1 - 2(1 - Phi(c)), c the Pocock boundary."""
    c = pocock_boundary(looks, alpha)
    return 1.0 - 2.0 * (0.5 * math.erfc(c / math.sqrt(2.0)))


def interval_level(plan: dict[str, Any] | None, default: float) -> float:
    """The level a claim's interval is judged at under a declared ``plan`` (a record's ``sequential`` block):
    the plan's level when it declares a group-sequential design, else ``default`` (the claim's ``accept.ci``).
    This is the one function the verdict path calls for the level (through :func:`apply_plan`)."""
    if not plan or plan.get("design") != "pocock":
        return default
    return float(plan["interval"])


def apply_plan(spec: Any, plan: dict[str, Any] | None, scale: str) -> Any:
    """``spec`` with the measured claims judged at ``scale`` given the plan's interval level (``accept.ci``);
    claims decided by the model's structure and claims of other scales keep theirs."""
    if not plan or plan.get("design") != "pocock":
        return spec
    claims = []
    for claim in spec.claims:
        if claim.scale == scale and claim.decided_by == "measurement" and claim.accept.rule == "ci":
            accept = claim.accept.model_copy(update={"ci": interval_level(plan, claim.accept.ci)})
            claim = claim.model_copy(update={"accept": accept})
        claims.append(claim)
    return spec.model_copy(update={"claims": claims})


def level_text(level: float | None) -> str:
    """``"95 % CI"``, ``"97.06 % CI"``: an interval's level as the report, RESULTS.md and the console say it (the
    level a verdict was judged at, a Pocock plan's included; never rounded to a level it was not)."""
    value = 100 * (0.95 if level is None else float(level))
    return f"{value:.2f}".rstrip("0").rstrip(".") + " % CI"
