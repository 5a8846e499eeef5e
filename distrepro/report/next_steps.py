"""What would decide an undecided claim: the next step every INCONCLUSIVE verdict names.

A reader told "outside the paper's regime" or "too few seeds" needs the command that decides the claim, not a
diagnosis. Each INCONCLUSIVE verdict of the report gets one more clause, chosen from what the paper ships:

* outside the regime (or arms tied) at a scale below one the paper has configs for, and the claim moves there
  (:func:`distrepro.claims.schema.at_scale`): the ``distrepro reproduce <paper> --scale <s>`` that trains it;
* too few seeds: the session that runs the claim's ``min_seeds`` confirmatory seeds (the pre-registered ones, else
  fresh ones registered first);
* an interval that straddles the band: the seeds needed at the measured spread, n ≈ (t·s/d)², from the verdict
  rule's ``seeds_needed`` on the verdict (:mod:`distrepro.claims.planning`; this module only phrases it);
* an arm with no runs: the ``--arms`` run that adds it.

The same check warns before training (:func:`seed_warnings`): ``reproduce --seeds`` below a claim's minimum
cannot decide that claim, which the user should know before minutes of training, not after.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from distrepro.claims.papers import PaperInfo, arms_at_scale
from distrepro.claims.preregistration import CONFIRMATORY_FIRST_SEED, registered_seeds
from distrepro.claims.schema import TRAINING_SCALES, at_scale, claim_arms
from distrepro.claims.verdicts import Verdict

#: scales above the proxy, in the order a user would try them (CPU first)
_LARGER = ("mid", "gpu", "paper")


def _seeds_that_decide(info: PaperInfo, scale: str, need: int) -> str:
    """The command clause that gets ``need`` confirmatory seeds at ``scale``: the default session when the scale's
    pre-registration has that many (``reproduce`` runs them without ``--seeds``), else a registration of fresh ones
    first, above every seed registered before (exploratory seeds 0-99 decide no confirmatory claim)."""
    paper = info.id
    flag = "" if scale == "proxy" else f" --scale {scale}"
    registered = registered_seeds(info.path, scale)
    if registered is not None and len(registered[0]) >= need:
        return f"`distrepro reproduce {paper}{flag}` runs the {len(registered[0])} seeds pre-registered for it"
    first = max(registered[0], default=CONFIRMATORY_FIRST_SEED - 1) + 1 if registered else CONFIRMATORY_FIRST_SEED
    replace = " --replace" if registered is not None else ""
    return (
        f"register {need} fresh seeds first (`distrepro preregister {paper} --scale {scale} --seeds "
        f"{first}-{first + need - 1}{replace}`), then `distrepro reproduce {paper}{flag}`"
    )


def _decides_at(info: PaperInfo, claim: Any, root: Path | None) -> str | None:
    """The first scale above the claim's where the paper ships configs of every arm it reads and the claim moves."""
    spec = info.spec
    if spec is None:
        return None
    order = ("proxy", *_LARGER)
    here = order.index(claim.scale) if claim.scale in order else 0
    for scale in order[here + 1 :]:
        available = arms_at_scale(info, scale, root)
        if not set(claim_arms(claim)) <= available:
            continue
        moved = at_scale(spec, scale, available if scale in TRAINING_SCALES else None)  # type: ignore[arg-type]
        if any(c.id == claim.id and c.scale == scale for c in moved.claims):
            return scale
    return None


def _seeds_for_spread(verdict: Verdict, claim: Any) -> int | None:
    """Seeds that would resolve a straddling interval at the measured spread: the verdict rule's n ≈ (t·s/d)²
    (:func:`distrepro.claims.planning.seeds_to_clear`, kept on the verdict as ``seeds_needed``)."""
    n = getattr(verdict, "seeds_needed", None)
    return int(n) if n else None


def next_step(info: PaperInfo, claim: Any, verdict: Verdict, root: Path | None = None) -> str:
    """The clause naming what would decide ``verdict`` (empty when it is decided, or nothing applies)."""
    if verdict.verdict != "INCONCLUSIVE":
        return ""
    reason = verdict.reason
    paper = info.id
    if reason.startswith("arm missing"):
        arms = ",".join(claim_arms(claim))
        scale = "" if claim.scale == "proxy" else f" --scale {claim.scale}"
        return f"next step: `distrepro reproduce {paper}{scale} --arms {arms}` trains the arms it reads"
    if reason.startswith("too few seeds"):
        need = claim.accept.min_seeds
        return f"next step: {_seeds_that_decide(info, claim.scale, need)} ({need} seeds decide it)"
    if verdict.out_of_regime:
        larger = _decides_at(info, claim, root)
        if larger is not None:
            where = "on CPU, see `distrepro plan`" if larger == "mid" else "see `distrepro plan` for its time"
            return f"next step: `distrepro reproduce {paper} --scale {larger}` decides it ({where})"
        return "no scale the paper ships reaches its regime: it stays undecided here"
    n = _seeds_for_spread(verdict, claim)
    if n is not None and n > verdict.n_seeds:
        scale = "" if claim.scale == "proxy" else f" --scale {claim.scale}"
        fresh = _fresh_seeds(verdict, n)
        return (
            f"next step: about {n} seeds would resolve it at the measured spread, in a new confirmatory run on seeds "
            f"never run before, registered first (`distrepro preregister {paper}{scale or ' --scale proxy'} "
            f"--seeds {fresh[0]}-{fresh[-1]} --replace`, then `distrepro reproduce {paper}{scale} --seeds "
            f"{fresh[0]}-{fresh[-1]}`)"
        )
    return ""


def _fresh_seeds(verdict: Verdict, n: int) -> list[int]:
    """``n`` seed indices above every seed this verdict read: a confirmatory run never reuses a seed it has seen."""
    seen = [s for arm in verdict.per_seed.values() for s in arm] + list(verdict.points)
    start = max(seen, default=-1) + 1
    return list(range(start, start + n))


def with_next_steps(
    info: PaperInfo, claims: Iterable[Any], verdicts: list[Verdict], root: Path | None
) -> list[Verdict]:
    """``verdicts`` with each INCONCLUSIVE reason ending in its next step (:func:`next_step`)."""
    by_id = {c.id: c for c in claims}
    out = []
    for v in verdicts:
        step = next_step(info, by_id[v.claim_id], v, root) if v.claim_id in by_id else ""
        out.append(dataclasses.replace(v, reason=f"{v.reason.rstrip('. ')}; {step}") if step else v)
    return out


def seed_warnings(
    info: PaperInfo, arms: Iterable[str], scale: str, n_seeds: int | None, root: Path | None = None
) -> list[str]:
    """One line per claim of the arms to train that ``n_seeds`` seeds cannot decide (below its ``min_seeds``)."""
    spec = info.spec
    if spec is None or n_seeds is None:
        return []
    chosen = set(arms)
    lines = []
    available = arms_at_scale(info, scale, root) if scale in TRAINING_SCALES else None
    for claim in at_scale(spec, scale, available).claims:  # type: ignore[arg-type]
        need = claim.accept.min_seeds
        if claim.scale == scale and set(claim_arms(claim)) & chosen and need and n_seeds < need:
            lines.append(
                f"warning: {n_seeds} seed{'s' if n_seeds != 1 else ''} cannot decide claim {claim.id} "
                f"(it needs {need}: {_seeds_that_decide(info, scale, need)}); it will read INCONCLUSIVE"
            )
    return lines
