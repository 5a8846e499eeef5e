"""What kind of evidence each verdict is, and the tallies a report leads with.

A reproduction judges the paper's own claims, readings we derive from them (an ordering two of
its numbers imply, a time-to-target version of a fixed-budget claim) and tests we reconstruct
(a convergence claim with our margin). Pooling them all in one "3 PASS · 7 FAIL" counts a paper
number twice (once as stated, once per derived reading) and counts claims that the emulator
decides by construction (a modelled ZeRO-2 costs exactly one all-reduce, so it ties DDP) as if
they were measurements. So every claim carries ``origin`` (paper / derived / reconstructed) and
``decided_by`` (measurement / model_structure, with a ``why``), and the *headline* tally counts
only the paper's own claims that a measurement decided; the rest are reported beside it
(the counting itself: :mod:`distrepro.claims.tally`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from distrepro.claims.acceptance import check_ci_method, default_paired
from distrepro.errors import ConfigError

#: default ``origin`` from ``evidence``: a number taken from the paper makes a paper claim
ORIGIN_OF = {"verbatim": "paper", "figure": "paper", "derived": "derived", "reconstructed": "reconstructed"}
VERDICTS = ("PASS", "FAIL", "INCONCLUSIVE")


def check_evidence_and_accept(min_seeds: int, claim: Any, at: str, source: str | Path | None) -> None:
    """A claim's evidence tags agree with each other, and its acceptance rule can be computed.

    ``min_seeds`` is ``setup.min_seeds`` (the claim's own ``accept.min_seeds`` wins).
    """
    if claim.origin == "paper" and claim.evidence in ("derived", "reconstructed"):
        why = f"a claim the paper states takes its number from the paper (evidence is {claim.evidence!r})"
        raise ConfigError(source, f"{at}.origin", why)
    if claim.decided_by == "model_structure" and not (claim.why or "").strip():
        raise ConfigError(source, f"{at}.why", "a claim decided by model_structure must say why it cannot vary")
    if claim.decided_by == "measurement" and claim.why is not None:
        raise ConfigError(source, f"{at}.why", "only a claim decided by model_structure takes a 'why'")
    paired = claim.accept.paired if claim.accept.paired is not None else default_paired(claim)
    problem = check_ci_method(claim, paired)
    if problem:
        raise ConfigError(source, f"{at}.accept.ci_method", problem)
    seeds = claim.accept.min_seeds or min_seeds
    if claim.accept.rule == "ci" and seeds < 2:
        where = f"{at}.accept.min_seeds" if claim.accept.min_seeds else "setup.min_seeds"
        raise ConfigError(source, where, "rule ci needs at least 2 seeds (one seed has no spread to estimate)")


def group_of(claim: Any) -> str:
    """``headline`` (the paper's claim, measured), ``structural`` (decided by the model, any origin)
    or ``derived`` (a derived or reconstructed reading, measured)."""
    if claim.decided_by == "model_structure":
        return "structural"
    return "headline" if claim.origin == "paper" else "derived"
