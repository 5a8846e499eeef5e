"""Rules across a ``paper.yaml``'s fields that pydantic cannot see: unique ids, arms that exist, baselines,
metrics some writer logs, statistics that fit the kind, links between claims (``conflicts_with``,
``counts_with``, ``same_as``) that name real claims. Each error names the file and the field
(``claims[2].baseline``); :func:`distrepro.claims.schema.validate_paper` runs them after the model validates.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from distrepro.claims.acceptance import SIGNED, claimed_bounds
from distrepro.claims.evidence import check_evidence_and_accept
from distrepro.claims.regime import condition_arms
from distrepro.errors import ConfigError
from distrepro.metrics import is_per_rank, unknown_metric


def check_references(spec: Any, source: str | Path | None, known_methods: set[str] | None) -> None:
    """Cross-field rules pydantic cannot see: unique ids, arms that exist, required baselines."""
    arms = set(spec.setup.arms)
    optional = {name for name, arm in spec.setup.arms.items() if arm.optional}

    def arm_ok(name: str, where: str) -> None:
        if name in optional:  # a default reproduction does not run it: its claims would stay INCONCLUSIVE
            raise ConfigError(source, where, f"arm {name!r} is optional (run only on request) and cannot carry a claim")
        if name in arms or known_methods is None or name in known_methods:
            return
        raise ConfigError(source, where, f"unknown arm {name!r}: define it under setup.arms or name a method folder")

    for name, arm in spec.setup.arms.items():
        if known_methods is not None and arm.method not in known_methods:
            raise ConfigError(source, f"setup.arms.{name}.method", f"unknown method {arm.method!r}")
    if spec.setup.baseline is not None:
        arm_ok(spec.setup.baseline, "setup.baseline")
    ids = [c.id for c in spec.claims]
    for i, claim in enumerate(spec.claims):
        at = f"claims[{i}]"
        if ids.index(claim.id) != i:
            raise ConfigError(source, f"{at}.id", f"duplicate claim id {claim.id!r}")
        _check_metric(claim, at, source)
        for j, other in enumerate(claim.conflicts_with):
            if other not in ids or other == claim.id:
                raise ConfigError(source, f"{at}.conflicts_with[{j}]", f"no other claim with id {other!r}")
        for key in ("counts_with", "same_as"):
            other = getattr(claim, key)
            if other is not None and (other not in ids or other == claim.id):
                raise ConfigError(source, f"{at}.{key}", f"no other claim with id {other!r}")
        if claim.kind == "ordering":
            if len(set(claim.arms)) != len(claim.arms):
                raise ConfigError(source, f"{at}.arms", "an arm is listed twice")
            for j, name in enumerate(claim.arms):
                arm_ok(name, f"{at}.arms[{j}]")
        else:
            if claim.arm is None:
                raise ConfigError(source, f"{at}.arm", f"a {claim.kind} claim needs the arm it is about")
            arm_ok(claim.arm, f"{at}.arm")
        if hasattr(claim, "baseline"):
            base = claim.baseline or spec.setup.baseline
            if base is None:
                raise ConfigError(source, f"{at}.baseline", "needs a baseline arm (here or in setup.baseline)")
            arm_ok(base, f"{at}.baseline")
            if base == claim.arm:
                raise ConfigError(source, f"{at}.baseline", "the baseline must differ from the arm")
        stat = claim.accept.statistic
        signed = claim.kind in SIGNED or (claim.kind == "relative_improvement" and claim.form == "difference")
        if stat == "geometric_mean" and signed:
            raise ConfigError(
                source, f"{at}.accept.statistic", "geometric_mean is for positive ratios and fractions; use the mean"
            )
        if claim.kind == "speedup":
            if claim.measure == "budget_time" and claim.clock not in ("emulated", "wall"):
                raise ConfigError(source, f"{at}.clock", "budget_time is measured on the emulated or wall clock only")
            if claim.measure == "budget_time" and claim.target is not None:
                raise ConfigError(source, f"{at}.target", "a target needs measure: time_to_target")
            if claim.measure == "time_to_target" and claim.target is None and claim.clock != "emulated":
                raise ConfigError(
                    source, f"{at}.target", f"clock {claim.clock!r} needs an explicit target (curves are read)"
                )
        _check_regime(claim, at, source, arm_ok)
        check_evidence_and_accept(spec.setup.min_seeds, claim, at, source)
        bounds = claimed_bounds(getattr(claim, "claimed", None))
        positive = claim.kind in ("speedup", "convergence") or (
            claim.kind == "relative_improvement" and claim.form == "ratio"
        )
        if positive and bounds is not None and bounds[0] <= 0:
            raise ConfigError(source, f"{at}.claimed", "must be positive for this kind")


def _check_regime(claim: Any, at: str, source: str | Path | None, arm_ok: Any) -> None:
    """Regime conditions name arms that exist and metrics some writer logs, once each."""
    seen: set[str] = set()
    for j, cond in enumerate(claim.regime):
        where = f"{at}.regime[{j}]"
        if cond.id in seen:
            raise ConfigError(source, f"{where}.id", f"duplicate regime condition id {cond.id!r}")
        seen.add(cond.id)
        for name in condition_arms(claim, cond):
            arm_ok(name, f"{where}.{'arms' if cond.check == 'control' else 'arm'}")
        why = unknown_metric(cond.metric) if cond.metric is not None else None
        if why is not None:
            raise ConfigError(source, f"{where}.metric", f"claim {claim.id!r}: {why}")
        if cond.check == "detectable" and cond.effect is None and getattr(claim, "claimed", None) is None:
            raise ConfigError(source, f"{where}.effect", "a claim without a claimed value needs the paper's effect")


def _check_metric(claim: Any, at: str, source: str | Path | None) -> None:
    """A claim names a metric some writer logs (:mod:`distrepro.metrics`); a typo would only ever be INCONCLUSIVE."""
    named = [("metric", getattr(claim, "metric", None))]
    target = getattr(claim, "target", None)
    if target is not None:
        named.append(("target.metric", target.metric))
    for field, name in named:
        why = unknown_metric(name) if name is not None else None
        if why is not None:
            raise ConfigError(source, f"{at}.{field}", f"claim {claim.id!r}: {why}")
    if target is not None and is_per_rank(target.metric):  # a target is read off the curve of every evaluation
        raise ConfigError(
            source,
            f"{at}.target.metric",
            f"claim {claim.id!r}: {target.metric!r} is one rank's value, logged at the final evaluation only, so it "
            "has no curve to reach a target on; name the run's own metric (e.g. its mean over the ranks)",
        )
