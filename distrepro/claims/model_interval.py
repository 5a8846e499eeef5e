"""The emulator's own error in a timing verdict: a model interval beside the seed interval.

A timing verdict compares emulated times, and an emulated time is a prediction with an error: on points nobody here
fitted, the emulator is off by several per cent and more on some classes of cluster
(:mod:`distrepro.hardware.emulator_error`, scored leave one source out). The seed interval says nothing of that
error: a zero-width interval around a ratio of two predictions is a statement about the model, not about the paper.

So every claim whose per-seed values are emulated times (or rates, or shares read off the emulated clock) is judged
again at every corner of its arms' error bands: each arm's true time lies in ``[T/(1+e), T/(1−e)]`` for its band
``e`` (a rate likewise, "+" meaning predicted too fast for both), and the claim's own rule is re-run on the scaled
per-seed values, so the band travels through whatever statistic the claim uses (a ratio, a fraction, a gap, an
ordering). The range of the point statistic over the corners is the **model interval**, shown beside the seed
interval. A PASS or FAIL that does not hold at every corner is **INCONCLUSIVE**: the gap to the claim lies within
the emulator's validated error, and the next step is to calibrate on the paper's hardware or to run there. So is a
FAIL whose corners miss a two-sided band on both sides (short of it at one corner, beyond it at another): the
statistic moves continuously between the corners, so somewhere inside the error the claim holds.

Arms' errors are taken as independent (each arm has its own band; two arms of one class may share a bias, which
would cancel in a ratio): the model interval is the conservative one, which is the reading a verdict needs. A share
read off one run (the fraction of time not computing) is scaled by its arm's band too, an approximation: such a
share moves only as far as compute and communication are mis-predicted differently.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from distrepro import metrics as M
from distrepro.claims.gather import claim_metric
from distrepro.claims.stats import fmt
from distrepro.claims.verdict_record import Verdict
from distrepro.hardware.emulator_error import ErrorBand

#: per-seed values that are emulated times (seconds), rates per emulated second, or shares of emulated time
_EMULATED_TIMES = (M.FINAL_EMULATED_S, M.EMULATED_S, M.TIME_TO_TARGET_S, "emu_ms/")
_EMULATED_RATES = (M.FINAL_USEFUL_FLOPS,)
_EMULATED_SHARES = (M.FINAL_IDLE_FRACTION, M.FINAL_NON_COMPUTE_FRACTION)
_WORKER_TIMES = ("clock_s", "compute_s", "comm_s", "idle_s")
#: a band at or above this cannot bound a time from above (T/(1−e) diverges): the model interval is unbounded
_MAX_REL = 0.95

Judge = Callable[[Any, dict[str, dict[int, float]]], Verdict]


@dataclass(frozen=True)
class ModelCheck:
    """What the corners said: the model interval of the point statistic, each arm's band, and whether the verdict
    held at every corner."""

    interval: tuple[float, float]
    bands: dict[str, ErrorBand]
    holds: bool
    corner_verdicts: tuple[str, ...]
    #: each FAIL corner's side of the band ("falls short of the claim" / "exceeds the claim"), in corner order
    corner_misses: tuple[str, ...] = ()


def emulated_quantity(claim: Any) -> str | None:
    """``time``, ``rate`` or ``share`` when the claim's per-seed values are read off the emulated clock, else None
    (accuracies, bytes, wall time, steps: the emulator's time error does not reach them)."""
    target = getattr(claim, "target", None)
    if claim.kind == "speedup":
        if getattr(claim, "clock", "emulated") != "emulated":
            return None
        unit = getattr(claim, "unit", None)
        return "time" if target is None or unit in (None, "emulated_s") else None
    if target is not None:  # a convergence claim on a curve: emulated time only when its unit is
        return "time" if getattr(claim, "unit", None) == "emulated_s" else None
    metric = str(claim_metric(claim) or "")
    if metric.startswith(_EMULATED_TIMES) or (metric.startswith("worker/") and metric.endswith(_WORKER_TIMES)):
        return "time"
    if metric.startswith(_EMULATED_RATES):
        return "rate"
    if metric.startswith(_EMULATED_SHARES):
        return "share"
    return None


def _scaled(values: Mapping[int, float], factor: float) -> dict[int, float]:
    return {seed: v * factor for seed, v in values.items()}


def check(claim: Any, verdict: Verdict, bands: Mapping[str, ErrorBand], judge: Judge) -> ModelCheck | None:
    """Re-judge ``claim`` at every corner of its arms' ``bands`` (arm → band) with ``judge`` (the claim's own rule
    on per-seed values); None when the verdict has no per-seed values or no arm carries a band."""
    arms = {name: values for name, values in verdict.per_seed.items() if values}
    banded = [name for name in arms if name in bands]
    if not banded or verdict.statistic is None:
        return None
    if any(bands[name].rel >= _MAX_REL for name in banded):
        return ModelCheck((float("-inf"), float("inf")), {n: bands[n] for n in banded}, False, ())
    stats, kinds, misses = [], [], []
    for signs in itertools.product((-1.0, 1.0), repeat=len(banded)):
        scaled = dict(arms)
        for name, sign in zip(banded, signs, strict=True):
            scaled[name] = _scaled(arms[name], 1.0 / (1.0 + sign * bands[name].rel))
        corner = judge(claim, scaled)
        kinds.append(corner.verdict)
        if corner.verdict == "FAIL" and corner.miss:
            misses.append(corner.miss)
        if corner.statistic is not None:
            stats.append(corner.statistic)
    low, high = (min(stats), max(stats)) if stats else (verdict.statistic, verdict.statistic)
    # corners that fail on both sides of a band leave the band between them: the claim holds somewhere inside
    holds = all(k == verdict.verdict for k in kinds) and len(set(misses)) <= 1
    return ModelCheck((low, high), {n: bands[n] for n in banded}, holds, tuple(kinds), tuple(misses))


def describe_bands(bands: Mapping[str, ErrorBand]) -> str:
    """``allreduce ±13.8 % (the paper's own cell …); accum_aer ±53 % (…)`` for a reason or a report row."""
    return "; ".join(f"'{name}' ±{b.rel:.1%} ({b.basis})" for name, b in bands.items())


def apply(claim: Any, verdict: Verdict, result: ModelCheck, paper: str) -> None:
    """Record the model interval on ``verdict``; a PASS or FAIL that a corner does not share becomes INCONCLUSIVE."""
    verdict.model_interval = result.interval
    verdict.model_error = {name: b.rel for name, b in result.bands.items()}
    verdict.model_basis = describe_bands(result.bands)
    read = {name for name, values in verdict.per_seed.items() if values}
    verdict.model_covered = read <= set(result.bands) and all(b.covered for b in result.bands.values())
    verdict.model_holds = result.holds
    if result.holds or verdict.verdict not in ("PASS", "FAIL"):
        return
    low, high = result.interval
    widest = max(b.rel for b in result.bands.values())
    verdict.within_model_error = True
    verdict.reason = (
        f"{verdict.verdict} on the seeds, but within the emulator's validated error (± up to {widest:.1%}, out of "
        f"sample): model interval [{fmt(low)}, {fmt(high)}] ({_corners(verdict.verdict, result)}), so it decides "
        "nothing about the paper; next step: "
        f"calibrate the profile on the paper's hardware (`distrepro calibrate`) or run `distrepro reproduce {paper}` "
        f"there ({verdict.reason})"
    )
    verdict.verdict = "INCONCLUSIVE"


def _corners(seed_verdict: str, result: ModelCheck) -> str:
    """Why the corners overturn the seeds' verdict. The model interval is the point statistic's range only: a corner
    whose statistic is still outside the band can be INCONCLUSIVE because its seed interval, scaled with it, reaches
    the band's edge, which the interval alone does not show."""
    kinds = result.corner_verdicts
    if not kinds:
        return f"a band of ±{_MAX_REL:.0%} or more bounds no time"
    if set(kinds) == {seed_verdict} and len(set(result.corner_misses)) > 1:
        sides = ", ".join(f"{miss} at {n}" for miss, n in sorted(Counter(result.corner_misses).items()))
        return (
            f"the statistic at the bands' {len(kinds)} corners: FAIL on both sides of the band ({sides}), which lies "
            "between them"
        )
    other = Counter(k for k in kinds if k != seed_verdict)
    said = ", ".join(f"{kind} at {n}" for kind, n in sorted(other.items()))
    return f"the statistic at the bands' {len(kinds)} corners; the verdict there, seed interval scaled too: {said}"


def arm_bands(spec: Any, paper: str, verdict: Verdict) -> dict[str, ErrorBand]:
    """Each arm's band, from its method's declared exchange and the profile(s) its deciding runs used (the widest,
    where an arm ran on several). A method that is not a plugin here counts as exchanging by all-reduce; an arm
    whose profile cannot be read gets no band (so its verdict is not covered by the validation)."""
    from distrepro.errors import DistreproError
    from distrepro.hardware.emulator_error import arm_band
    from distrepro.hardware.profiles import load_profile
    from distrepro.plugins.registry import get_method

    out: dict[str, ErrorBand] = {}
    for name, profiles in verdict.arm_profiles.items():
        arm = spec.arm(name)
        try:
            exchange = getattr(get_method(arm.method).cls, "exchange", "all_reduce")
        except DistreproError:
            exchange = "all_reduce"
        try:
            found = [arm_band(paper, load_profile(p), arm.method, exchange, dict(arm.params)) for p in profiles]
        except (DistreproError, OSError):
            continue
        if found:
            out[name] = max(found, key=lambda b: b.rel)
    return out


def check_all(spec: Any, paper: str, verdicts: list[Verdict], judge: Judge) -> None:
    """Put a model interval on every verdict whose values are read off the emulated clock (see the module)."""
    by_id = {c.id: c for c in spec.claims}
    for verdict in verdicts:
        claim = by_id.get(verdict.claim_id)
        if claim is None or emulated_quantity(claim) is None or not verdict.arm_profiles:
            continue
        result = check(claim, verdict, arm_bands(spec, paper, verdict), judge)
        if result is not None:
            apply(claim, verdict, result, paper)
