"""The verdicts as every output shows them, built once: one :class:`ShownVerdict` per claim and one count per unit.

The console (``distrepro report``, ``distrepro reproduce``), the report's first screen and claims tables (Markdown
and HTML), ``claims_verdict.json``, ``RESULTS.md`` and the papers index all print a claim's verdict word, what it
is evidence about, its unit and what qualifies it from one :class:`Shown`, so that no output can say PASS where
another says it depends on an assumption, or count a merged unit twice.

* **word**: ``PASS``, ``FAIL`` or ``INCONCLUSIVE`` as judged, or ``DEPENDS`` for a timing verdict that flips over
  the plausible hardware (counted apart, :mod:`distrepro.claims.tally`);
* **about**: what the verdict is evidence about (:mod:`distrepro.claims.attribution`), and **said**, the words
  that follow from it ("does not hold", "not reproduced on the proxy", ...);
* **unit**: the claims counted with it (``same_as``/``counts_with``), counted once in :attr:`Shown.tally`;
* **qualifiers**: what the verdict rests on beyond its interval: the figure it depends on, the direction of a miss,
  whether it stands after Holm, and ``post hoc`` for a claim changed after its verdicts were seen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from distrepro.claims.attribution import said
from distrepro.claims.evidence import group_of
from distrepro.claims.tally import Tally, tally, units

DEPENDS = "DEPENDS"


@dataclass(frozen=True)
class ShownVerdict:
    """One claim's verdict as shown: the same word, about, unit and qualifiers in every output."""

    claim_id: str
    group: str  # headline, derived or structural (distrepro.claims.evidence.group_of)
    verdict: str  # as judged: PASS, FAIL or INCONCLUSIVE
    word: str  # as shown: the verdict, or DEPENDS when an assumed hardware figure decides it
    about: str  # distrepro.claims.attribution.ABOUT
    said: str  # the verdict in words, following ``about``
    unit: tuple[str, ...]  # the claims counted once with it (itself alone when not merged)
    qualifiers: tuple[str, ...] = ()

    def text(self) -> str:
        """``FAIL · not reproduced on the proxy (falls short of the claim; stands after Holm)``."""
        extra = f" ({'; '.join(self.qualifiers)})" if self.qualifiers else ""
        return f"{self.word} · {self.said}{extra}"

    def tags(self) -> str:
        """``headline · about the proxy · unit A-C1+A-C3``: where the console puts it, after the claim id."""
        unit = f" · unit {'+'.join(self.unit)}" if len(self.unit) > 1 else ""
        return f"{self.group} · about {_ABOUT_WORDS.get(self.about, self.about)}{unit}"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["unit"] = list(self.unit)
        out["qualifiers"] = list(self.qualifiers)
        out["text"] = self.text()
        return out


_ABOUT_WORDS = {
    "paper": "the paper",
    "emulation": "the emulated setting",
    "proxy": "the proxy",
    "reimplementation": "our re-implementation",
    "inconsistent": "an inconsistent unit",
}


@dataclass
class Shown:
    """Every claim's :class:`ShownVerdict`, in the claims file's order, and the one :class:`Tally` of their units."""

    rows: list[ShownVerdict]
    tally: Tally

    def of(self, claim_id: str) -> ShownVerdict:
        return next(r for r in self.rows if r.claim_id == claim_id)

    def summary(self) -> str:
        return self.tally.summary()

    def to_dict(self) -> dict[str, Any]:
        t = self.tally
        return {
            "summary": t.summary(),
            "headline": t.text(t.of("headline"), "headline") if t.total("headline") else None,
            "apart": t.apart_text(),
            "all": t.text(t.all_claims()),
            "holm": t.holm_text(),
            "rows": {r.claim_id: r.to_dict() for r in self.rows},
        }


def qualifiers(claim: Any, v: Any) -> tuple[str, ...]:
    """What a verdict rests on beyond its interval: post hoc (a choice made after its record: never counted) or not
    frozen (its record predates frozen inputs), a hardware assumption (a merged claim's unit share decides it), the
    direction of a miss, Holm, and a claim the paper's file marks post hoc."""
    parts = []
    if getattr(v, "post_hoc", ""):
        parts.append(f"POST HOC, not counted: {v.post_hoc}")
    elif getattr(v, "not_frozen", False):
        parts.append("not frozen (its record predates frozen inputs)")
    if v.depends_on:
        settings = "of the plausible hardware settings"
        share = f"PASS in {100 * v.pass_share:.0f}% {settings}" if v.pass_share is not None else ""
        if getattr(v, "unit_pass_share", None) is not None:  # a merged claim: its unit's share decides
            alone = f"; this claim alone {100 * v.pass_share:.0f}%" if v.pass_share is not None else ""
            share = (
                f"its unit with {', '.join(v.unit_with)} holds in {100 * v.unit_pass_share:.0f}% of the plausible "
                f"hardware settings{alone}"
            )
        parts.append(f"depends on {v.depends_on}" + (f" ({share})" if share else ""))
    if v.verdict == "FAIL" and v.miss:
        parts.append(v.miss)
    if v.holm:
        parts.append("stands after Holm" if v.holm == "stands" else v.holm)
    if claim is not None and getattr(claim, "post_hoc", None):
        parts.append("post hoc")
    return tuple(parts)


def show(spec: Any, verdicts: Sequence[Any]) -> Shown:
    """The shown verdicts of ``spec``'s claims: tallies once (setting Holm and ``inconsistent`` on the verdicts),
    then one row per verdict whose claim is in ``spec``. ``about`` comes from the verdicts
    (:func:`distrepro.claims.attribution.attribute`; empty counts as ``paper``)."""
    claims = list(spec.claims)
    t = tally(claims, verdicts)
    by_id = {c.id: c for c in claims}
    unit_of = {
        i: tuple(ids) for ids in units([c for c in claims if c.id in {v.claim_id for v in verdicts}]) for i in ids
    }
    rows = [shown_row(by_id[v.claim_id], v, unit_of.get(v.claim_id)) for v in verdicts if v.claim_id in by_id]
    return Shown(rows, t)


def shown_row(claim: Any, v: Any, unit: tuple[str, ...] | None = None) -> ShownVerdict:
    """One claim's shown verdict (its ``unit``: the claims counted with it, default itself); reads the verdict,
    never changes it."""
    about = getattr(v, "about", "") or "paper"
    if v.depends_on:
        word, words = DEPENDS, f"depends on an assumption ({v.verdict} on the declared hardware)"
    else:
        word, words = v.verdict, said(v.verdict, about)
    return ShownVerdict(
        v.claim_id, group_of(claim), v.verdict, word, about, words, unit or (v.claim_id,), qualifiers(claim, v)
    )


def scale_tallies(spec: Any, verdicts: Sequence[Any]) -> dict[str, Tally]:
    """Per scale, the tally of the claims decided at it (each claim's ``scale``), counted as :func:`show` counts
    (once per unit, apart by what it is about), without touching the verdicts."""
    out: dict[str, Tally] = {}
    scales = dict.fromkeys(c.scale or spec.setup.scale for c in spec.claims)
    for scale in scales:
        claims = [c for c in spec.claims if (c.scale or spec.setup.scale) == scale]
        ids = {c.id for c in claims}
        out[scale] = tally(claims, [v for v in verdicts if v.claim_id in ids], mark=False)
    return out
