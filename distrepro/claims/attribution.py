"""What a verdict is evidence about: the paper, or something that stands between the runs and the paper.

A FAIL reads "the paper's claim does not hold" only when nothing else can explain the miss. Every verdict carries
``about`` (:data:`ABOUT`):

* ``paper``: decided at the paper's scale on hardware the emulator's error is validated for. A *timing* verdict
  (its per-seed values read off the emulated clock, :func:`distrepro.claims.model_interval.emulated_quantity`) is
  about the paper only when every arm's error band rests on validation points of its own class
  (:attr:`distrepro.hardware.emulator_error.ErrorBand.covered`) and the verdict holds at every corner of the bands;
* ``emulation``: the emulated setting (an emulated baseline, estimated network or device figures): a timing verdict
  whose bands are not all covered or that a corner does not share; a claim decided by the model's structure;
* ``reimplementation``: an accuracy, convergence or loss verdict on a method that is our re-implementation, not yet
  checked against its authors' code (:attr:`distrepro.api.method.Method.reference_check` empty), for the claim's own
  arm (an ordering: its arms other than the baseline);
* ``proxy``: such a verdict on a checked method (or a standard algorithm) decided at another scale than the
  paper's (another model, dataset or size);
* ``inconsistent``: a member of a merged unit (``same_as``/``counts_with``) whose FAILs miss in opposite
  directions: the paper's claims in that unit cannot all hold, whatever the runs
  (set by :func:`distrepro.claims.tally.tally`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from distrepro.claims.model_interval import emulated_quantity

ABOUT = ("paper", "emulation", "proxy", "reimplementation", "inconsistent")
#: when a unit's members are about different things, the one that explains a miss first
PRECEDENCE = ("inconsistent", "reimplementation", "emulation", "proxy", "paper")

#: the verdict as the report says it: (about, verdict) → words; ``paper`` keeps the plain words
SAID = {
    "PASS": {
        "paper": "holds",
        "emulation": "reproduced on the emulated setting",
        "proxy": "reproduced on the proxy",
        "reimplementation": "reproduced by our re-implementation, which is not yet checked against the authors' code",
        "inconsistent": "the paper's claims in this unit cannot all hold",
    },
    "FAIL": {
        "paper": "does not hold",
        "emulation": "not reproduced on the emulated setting",
        "proxy": "not reproduced on the proxy",
        "reimplementation": "not reproduced by our re-implementation, which is not yet checked against the authors' "
        "code",
        "inconsistent": "the paper's claims in this unit cannot all hold",
    },
}
#: what a tally says of each kind of evidence kept apart from the paper's
APART = {
    "emulation": "on the emulated setting",
    "proxy": "on the proxy",
    "reimplementation": "by our unchecked re-implementation",
    "inconsistent": "in units whose claims cannot all hold",
}


def said(verdict: str, about: str) -> str:
    """``does not hold``, ``not reproduced on the proxy``…: the words a headline sentence leads with."""
    if verdict == "INCONCLUSIVE":
        return "cannot be decided"
    return SAID.get(verdict, SAID["FAIL"]).get(about or "paper", SAID[verdict]["paper"])


def own_arms(claim: Any, baseline: str | None = None) -> list[str]:
    """The arms a claim is about: its ``arm``, or an ordering's arms other than the baseline."""
    if claim.kind == "ordering":
        base = getattr(claim, "baseline", None) or baseline
        rest = [a for a in claim.arms if a != base]
        return rest or list(claim.arms)
    return [claim.arm]


def method_checked(method: str) -> bool:
    """Whether ``method``'s plugin declares a check against its authors' code (a plugin that cannot be loaded is not
    checked)."""
    from distrepro.plugins.registry import get_method

    try:
        return bool(getattr(get_method(method).cls, "reference_check", ""))
    except Exception:  # an unknown or broken plugin: nothing says it was checked
        return False


def about(claim: Any, verdict: Any, spec: Any, checked: Callable[[str], bool] | None = None) -> str:
    """What ``verdict`` (of ``claim`` in ``spec``) is evidence about (the module's rules, but ``inconsistent``);
    ``checked``: whether a method is checked against its authors' code (default :func:`method_checked`)."""
    checked = checked or method_checked
    if claim.decided_by == "model_structure":
        return "emulation"
    if emulated_quantity(claim) is not None:
        covered = getattr(verdict, "model_covered", False) and getattr(verdict, "model_holds", False)
        return "paper" if covered else "emulation"
    methods = [spec.arm(name).method for name in own_arms(claim, spec.setup.baseline)]
    if not all(checked(m) for m in methods):
        return "reimplementation"
    return "paper" if claim.scale == "paper" else "proxy"


def attribute(spec: Any, verdicts: Iterable[Any], checked: Callable[[str], bool] | None = None) -> None:
    """Set ``about`` on every verdict of a claim of ``spec`` (matched by id)."""
    by_id = {c.id: c for c in spec.claims}
    for v in verdicts:
        claim = by_id.get(v.claim_id)
        if claim is not None:
            v.about = about(claim, v, spec, checked)


def unit_about(members: Iterable[Any]) -> str:
    """A unit's ``about``: ``paper`` only when every member it takes is; else the first in :data:`PRECEDENCE`.
    A verdict never attributed (hand-made, or read from a file written before attribution) counts as ``paper``."""
    found = {getattr(v, "about", "") or "paper" for v in members}
    return next((a for a in PRECEDENCE if a in found), "paper")
