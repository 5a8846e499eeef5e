"""The tallies a report leads with: evidence about the paper, counted once, each decision's error stated.

What the headline counts (the paper's own claims decided by measurement, :func:`distrepro.claims.evidence.group_of`):

* **once per claim the paper makes**: claims that restate one number (``same_as``: Decent-DP's F7 = 1 − 1/F6)
  or that cannot both hold (``counts_with``: C-ADP's FLOPS ratio and its time cut, one the reciprocal of
  the other's complement) form one *unit*, counted once. A unit holds when any of its claims holds (the
  paper's statement, read either way, is borne out), fails when all fail, and is undecided otherwise;
  the table still lists every claim;
* **not when an assumption decides it**: a timing verdict that PASSes in more than 5 % and fewer than 95 %
  of the plausible hardware settings (the sensitivity sweep) *depends on* the estimated figure that flips
  it; it is counted apart, with its share, not as PASS or FAIL. A unit is one claim in every setting too:
  its verdict there combines its members' verdicts in that setting, and the share of settings in which the
  unit holds decides for all its members (:func:`unit_shares`); two members that each PASS in a different
  one of 32 settings make a unit that PASSes in 2/32 = 6 %, which depends on an assumption;
* **FAIL split by direction**: a result beyond the claim in the paper's favour (``exceeds``) is not the
  same finding as one that ``falls short``; a claimed tie contradicted either way counts as falling short; a unit
  whose FAILs miss in opposite directions is ``inconsistent`` (the paper's claims in it cannot all hold), and its
  members are evidence about that (``about = inconsistent``), not about the paper's result;
* **evidence about the paper apart from the rest**: a headline unit counts in the headline only when it is about
  the paper (:mod:`distrepro.claims.attribution`); one about the emulated setting, a proxy, our unchecked
  re-implementation or an inconsistent unit is tallied beside it, by what it is about;
* **with its error**: each decision is a one-sided test at 2.5 % (the 95 % interval wholly on one side of
  an edge). Over the m headline units, Holm's step-down procedure (Holm 1979, Scand. J. Statist. 6(2))
  keeps the family-wise error at 2.5 %: sorted ascending, the i-th p-value must be ≤ 0.025/(m − i + 1),
  and the first that is not stops the procedure. Each decided verdict records whether it ``stands``
  after Holm; the tally gives both counts. (p-values: :mod:`distrepro.claims.planning`.)
* **not when it is post hoc**: a verdict some choice of which was made after the pre-registration (its claim, a
  frozen input, the record itself: :func:`distrepro.claims.certification.standing`) is shown, marked, and left
  out of the counts and of Holm's family (:func:`counted`); the tally says how many were left out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from distrepro.claims.attribution import APART, unit_about
from distrepro.claims.evidence import VERDICTS, group_of

#: one-sided error of each decision (a two-sided 95 % interval wholly past one edge)
ALPHA = 0.025
#: PASS shares over the plausible hardware within which a timing verdict depends on an assumption
FIRM_BELOW, FIRM_ABOVE = 0.05, 0.95
STANDS, NOT_AFTER_HOLM = "stands", "not after Holm"
#: a FAIL unit whose members miss in opposite directions (:func:`miss_of_unit`)
INCONSISTENT = "inconsistent"


def inconsistent_text(n: int = 1) -> str:
    """What an :data:`INCONSISTENT` unit means, in words (``n`` such units)."""
    return f"the claims in {'this unit' if n == 1 else 'each of these units'} cannot all hold"


def mark_dependence(
    verdicts: Sequence[Any],
    shares: Mapping[str, tuple[float, str]],
    settings: Mapping[str, Sequence[str]] | None = None,
    claims: Sequence[Any] = (),
    not_retimed: Mapping[str, str] | None = None,
) -> None:
    """Record each swept claim's PASS share (``shares``: claim id → (share, the decisive figure)) and mark
    ``depends_on`` where the share is strictly between 5 % and 95 %.

    With ``settings`` (claim id → its verdict at each hardware setting, the same settings in the same order for
    every claim) and ``claims``, a merged unit (:func:`units`) is one claim in every setting: its share
    (:func:`unit_shares`) decides ``depends_on`` for every member, named by the members' decisive figures; each
    member keeps its own share in ``pass_share`` (for display) and the unit's in ``unit_pass_share``.

    ``not_retimed`` (claim id → why) names the timing claims the hardware check could not re-time: a FAIL among them
    is never firm, since nobody knows whether a plausible setting would let it pass; it depends on the hardware
    figures the check could not vary, said with the reason."""
    merged = unit_shares(claims, verdicts, settings) if settings is not None else {}
    for v in verdicts:
        why = (not_retimed or {}).get(v.claim_id)
        if why and v.verdict == "FAIL" and not v.depends_on:
            v.depends_on = f"hardware figures the check could not vary (not re-timed: {why})"
    for v in verdicts:
        share, figure = shares.get(v.claim_id, (None, ""))
        if share is not None:
            v.pass_share = share
        if v.claim_id in merged:
            share, v.unit_with = merged[v.claim_id]
            v.unit_pass_share = share
            named = [shares[i][1] for i in (v.claim_id, *v.unit_with) if i in shares and shares[i][1]]
            figure = " and ".join(dict.fromkeys(named))
        if share is not None and FIRM_BELOW < share < FIRM_ABOVE:
            v.depends_on = figure or "the estimated hardware figures"


def verdict_of_unit(verdicts: Sequence[str]) -> str:
    """The rule of :func:`combine` on bare verdicts (one unit in one hardware setting): PASS if any member PASSes,
    FAIL if all FAIL, else INCONCLUSIVE."""
    if "PASS" in verdicts:
        return "PASS"
    return "FAIL" if verdicts and all(v == "FAIL" for v in verdicts) else "INCONCLUSIVE"


def unit_shares(
    claims: Sequence[Any], verdicts: Sequence[Any], settings: Mapping[str, Sequence[str]]
) -> dict[str, tuple[float, list[str]]]:
    """claim id → (its unit's PASS share, the unit's other members), for each member of a merged unit (two or more
    judged claims, :func:`units`) with a swept member. In each setting the unit's verdict is
    :func:`verdict_of_unit` of its members' verdicts *in that setting*; a member not swept (not a timing claim, or
    not re-timed) keeps its reported verdict in every setting. Two members that each PASS in a different one of 32
    settings make a unit that PASSes in 2 of them (6 %), not two claims that each PASS in 3 %."""
    judged = {v.claim_id: v for v in verdicts}
    out: dict[str, tuple[float, list[str]]] = {}
    for ids in units([c for c in claims if c.id in judged]):
        swept = [i for i in ids if i in settings]
        count = len(settings[swept[0]]) if swept else 0
        if len(ids) < 2 or not count:
            continue
        rows = [settings[i] if i in settings else [judged[i].verdict] * count for i in ids]
        if any(len(row) != count for row in rows):
            raise ValueError(f"unit {ids}: its members were judged over different numbers of settings")
        held = sum(verdict_of_unit([row[k] for row in rows]) == "PASS" for k in range(count))
        for i in ids:
            out[i] = (held / count, [j for j in ids if j != i])
    return out


def counted(verdicts: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    """The verdicts a tally counts, and the post-hoc ones it leaves out (their ``post_hoc`` says why)."""
    kept = [v for v in verdicts if not getattr(v, "post_hoc", "")]
    return kept, [v for v in verdicts if getattr(v, "post_hoc", "")]


def units(claims: Sequence[Any]) -> list[list[str]]:
    """Claim ids grouped by ``same_as``/``counts_with`` links (connected components), in file order."""
    parent = {c.id: c.id for c in claims}

    def root(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for c in claims:
        for other in (getattr(c, "same_as", None), getattr(c, "counts_with", None)):
            if isinstance(other, str) and other in parent:
                parent[root(c.id)] = root(other)
    groups: dict[str, list[str]] = {}
    for c in claims:
        groups.setdefault(root(c.id), []).append(c.id)
    return list(groups.values())


@dataclass
class Unit:
    """One claim of the paper as counted: its member claims' verdicts combined."""

    ids: list[str]
    group: str
    verdict: str
    miss: str = ""
    p_value: float | None = None
    depends_on: str = ""
    out_of_regime: bool = False
    about: str = "paper"  # what the unit is evidence about (distrepro.claims.attribution)


def combine(ids: list[str], group: str, verdicts: Sequence[Any]) -> Unit:
    """PASS if any member PASSes, FAIL if all FAIL, else INCONCLUSIVE; a unit depends on an assumption if a
    member whose verdict it takes does. A FAIL whose members miss in opposite directions is ``inconsistent``."""
    passed = [v for v in verdicts if v.verdict == "PASS"]
    if passed:
        best = min(passed, key=lambda v: v.p_value if v.p_value is not None else math.inf)
        return Unit(ids, group, "PASS", p_value=best.p_value, depends_on=best.depends_on, about=unit_about([best]))
    if verdicts and all(v.verdict == "FAIL" for v in verdicts):
        ps = [v.p_value for v in verdicts if v.p_value is not None]
        p = max(ps) if len(ps) == len(verdicts) else None
        miss = miss_of_unit(verdicts)
        depends = next((v.depends_on for v in verdicts if v.depends_on), "")
        about = INCONSISTENT if miss == INCONSISTENT else unit_about(verdicts)
        return Unit(ids, group, "FAIL", miss, p, depends, about=about)
    depends = next((v.depends_on for v in verdicts if v.depends_on), "")
    outside = any(getattr(v, "out_of_regime", False) for v in verdicts if v.verdict == "INCONCLUSIVE")
    return Unit(ids, group, "INCONCLUSIVE", depends_on=depends, out_of_regime=outside, about=unit_about(verdicts))


def miss_of_unit(members: Sequence[Any]) -> str:
    """How a FAIL unit missed the claim: ``exceeds`` when every member exceeds it, :data:`INCONSISTENT` when one
    member exceeds and another falls short (the claims in the unit cannot all hold: the paper's two readings of one
    result point opposite ways), else ``falls short`` (a claimed tie contradicted either way counts as falling
    short)."""
    over = [v.miss.startswith("exceeds") for v in members]
    if all(over):
        return "exceeds"
    return INCONSISTENT if any(over) else "falls short"


def holm(decided: list[Unit], m: int, alpha: float = ALPHA) -> list[Unit]:
    """The decided units that stand after Holm's step-down over ``m`` hypotheses. A unit without a p-value (a
    ``rule: point`` decision, a censored convergence FAIL) has no error to control, so the procedure stops there."""
    ordered = sorted(decided, key=lambda u: u.p_value if u.p_value is not None else math.inf)
    stand = []
    for i, unit in enumerate(ordered):
        if unit.p_value is None or unit.p_value > alpha / (m - i):
            break
        stand.append(unit)
    return stand


@dataclass
class Tally:
    """Verdict counts per group (see :func:`group_of`), one per unit, in the order a reader needs them."""

    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    #: per group, INCONCLUSIVE units whose runs were outside the paper's regime (or tied): counted apart
    outside: dict[str, int] = field(default_factory=dict)
    #: per group, FAIL units split: {"falls short": n, "exceeds": n, "inconsistent": n}
    fails: dict[str, dict[str, int]] = field(default_factory=dict)
    #: headline units not about the paper (distrepro.claims.attribution), by what they are about: verdict counts
    apart: dict[str, dict[str, int]] = field(default_factory=dict)
    #: per group, units whose verdict depends on an assumed hardware figure (not in PASS/FAIL/INCONCLUSIVE)
    depends: dict[str, int] = field(default_factory=dict)
    holm_m: int = 0  # headline units tested
    holm_stands: int = 0  # headline decisions (PASS or FAIL) that stand after Holm
    merged: int = 0  # claims counted inside another's unit (same_as / counts_with)
    #: per group, post-hoc verdicts left out of the counts (:func:`counted`)
    post_hoc: dict[str, int] = field(default_factory=dict)

    def post_hoc_text(self, group: str | None = None) -> str:
        """``"; 1 post hoc, not counted"`` (empty when none): said after the counts it was left out of."""
        n = sum(k for g, k in self.post_hoc.items() if group is None or g == group)
        return f"; {n} post hoc, not counted" if n else ""

    headline_rows: int = 0  # headline claims (rows of the table)
    headline_merged: int = 0  # headline claims counted inside another's unit

    def out_of_regime_total(self, group: str | None = None) -> int:
        return sum(n for g, n in self.outside.items() if group is None or g == group)

    def of(self, group: str) -> dict[str, int]:
        return self.counts.get(group, dict.fromkeys(VERDICTS, 0))

    def total(self, group: str | None = None) -> int:
        """Units counted in ``group`` (default: all), whatever they are about, those that depend on an assumption
        included."""
        groups = [group] if group else list(dict.fromkeys([*self.counts, *self.depends]))
        apart = sum(sum(c.values()) for c in self.apart.values())
        return sum(sum(self.of(g).values()) + self.depends.get(g, 0) for g in groups) + (
            apart if group in (None, "headline") else 0
        )

    def apart_text(self) -> str:
        """``2 FAIL (2 fall short) on the emulated setting; 1 PASS on the proxy``: the headline units kept apart."""
        parts = []
        for about, counts in self.apart.items():
            shown = " · ".join(f"{n} {k}" for k, n in counts.items() if n)
            parts.append(f"{shown} {APART.get(about, about)}")
        return "; ".join(parts)

    def text(self, counts: dict[str, int], group: str | None = None) -> str:
        """``2 PASS · 3 FAIL (2 fall short, 1 exceeds) · 1 INCONCLUSIVE · 1 depends on an assumption``."""
        parts = []
        for k in VERDICTS:
            part = f"{counts.get(k, 0)} {k}"
            split = self.fails.get(group or "", {}) if k == "FAIL" and group else {}
            if k == "FAIL" and counts.get("FAIL", 0) and split:
                short, over = split.get("falls short", 0), split.get("exceeds", 0)
                odd = split.get(INCONSISTENT, 0)
                both = f", {odd} {INCONSISTENT}: {inconsistent_text(odd)}" if odd else ""
                part += f" ({short} fall{'s' if short == 1 else ''} short, {over} exceed{'s' if over == 1 else ''}"
                part += f"{both})"
            parts.append(part)
        dep = self.depends.get(group or "", 0) if group else 0
        if dep:
            parts.append(f"{dep} depend{'s' if dep == 1 else ''} on an assumption")
        return " · ".join(parts)

    def all_claims(self) -> dict[str, int]:
        apart = {k: sum(c.get(k, 0) for c in self.apart.values()) for k in VERDICTS}
        return {k: sum(self.of(g)[k] for g in self.counts) + apart[k] for k in VERDICTS}

    def holm_decided(self) -> int:
        """Headline units decided (PASS or FAIL), whatever they are about: the decisions Holm's procedure takes."""
        about_paper = self.of("headline")["PASS"] + self.of("headline")["FAIL"]
        return about_paper + sum(c.get("PASS", 0) + c.get("FAIL", 0) for c in self.apart.values())

    def holm_why(self) -> str:
        """Why Holm's m differs from the number of headline claims (empty when it does not)."""
        if self.holm_m == self.headline_rows:
            return ""
        parts = []
        if self.headline_merged:
            parts.append(f"{self.headline_merged} counted inside another claim's unit (same_as / counts_with)")
        dep = self.depends.get("headline", 0)
        if dep:
            parts.append(f"{dep} unit{'s' if dep != 1 else ''} that depend{'s' if dep == 1 else ''} on an assumption")
        return f"{self.headline_rows} headline claims, less " + " and ".join(parts) if parts else ""

    def holm_text(self) -> str:
        """How many headline decisions stand with the family-wise error held at 2.5 %, and over how many tests."""
        decided = self.holm_decided()
        if not decided:
            return "each decision is a one-sided test at 2.5 %"
        why = self.holm_why()
        return (
            f"each decision is a one-sided test at 2.5 %; {self.holm_stands} of the {decided} decided stand(s) after "
            f"Holm's step-down over the {self.holm_m} headline claims"
            + (f" ({why})" if why else "")
            + " (family-wise 2.5 %)"
        )

    def summary(self) -> str:
        """One line, headline first: what the CLI prints and the campaign tag holds."""
        head = f"{self.text(self.of('headline'), 'headline')} of the paper's {self.total('headline')} claims"
        if self.apart:
            head = f"{self.text(self.of('headline'), 'headline')} about the paper, of its {self.total('headline')} "
            head += f"claims; apart, not about the paper: {self.apart_text()}"
        if self.out_of_regime_total("headline"):
            head += f" ({self.out_of_regime_total('headline')} INCONCLUSIVE outside the paper's regime)"
        if self.holm_decided():
            head += f"; {self.holm_stands} stand after Holm"
        head += self.post_hoc_text("headline")
        rest = []
        if self.total("derived"):
            out = self.out_of_regime_total("derived")
            where = f", {out} outside the paper's regime" if out else ""
            rest.append(f"derived/reconstructed {self.text(self.of('derived'), 'derived')}{where}")
        if self.total("structural"):
            rest.append(f"decided by the model's structure {self.text(self.of('structural'), 'structural')}")
        return head + (f" (also judged: {'; '.join(rest)})" if rest else "")


def tally(claims: Sequence[Any], verdicts: Sequence[Any], mark: bool = True) -> Tally:
    """Counts of ``verdicts`` per evidence group of their ``claims`` (matched by id), one per unit; with ``mark``
    (the default), sets each decided headline verdict's ``holm`` (and leaves the others' empty) and marks the
    members of an inconsistent unit ``about = inconsistent``; ``mark=False`` counts a subset (one scale's claims)
    without touching the verdicts."""
    by_id = {c.id: c for c in claims}
    kept, left_out = counted(verdicts)
    judged = {v.claim_id: v for v in kept}
    t = Tally()
    for v in left_out:
        if mark:  # not in Holm's family: it has no standing to report
            v.holm = ""
        if v.claim_id in by_id:
            group = group_of(by_id[v.claim_id])
            t.post_hoc[group] = t.post_hoc.get(group, 0) + 1
    headline: list[tuple[Unit, list[Any]]] = []
    for ids in units([c for c in claims if c.id in judged]):
        members = [judged[i] for i in ids]
        groups = [group_of(by_id[i]) for i in ids]
        group = "headline" if "headline" in groups else groups[0]
        unit = combine(ids, group, members)
        if unit.about == "inconsistent" and mark:
            for v in members:
                v.about = "inconsistent"
        t.merged += len(ids) - 1
        if group == "headline":
            t.headline_rows += groups.count("headline")
            t.headline_merged += groups.count("headline") - 1
        if unit.depends_on:
            t.depends[group] = t.depends.get(group, 0) + 1
        elif group == "headline" and unit.about != "paper":
            t.counts.setdefault(group, dict.fromkeys(VERDICTS, 0))
            t.apart.setdefault(unit.about, dict.fromkeys(VERDICTS, 0))[unit.verdict] += 1
            if unit.out_of_regime:
                t.outside[group] = t.outside.get(group, 0) + 1
        else:
            t.counts.setdefault(group, dict.fromkeys(VERDICTS, 0))[unit.verdict] += 1
            if unit.verdict == "FAIL":
                split = t.fails.setdefault(group, {"falls short": 0, "exceeds": 0, INCONSISTENT: 0})
                split[unit.miss] = split.get(unit.miss, 0) + 1
            if unit.out_of_regime:
                t.outside[group] = t.outside.get(group, 0) + 1
        if group == "headline" and not unit.depends_on:
            headline.append((unit, members))
    t.holm_m = len(headline)
    decided = [u for u, _ in headline if u.verdict in ("PASS", "FAIL")]
    stand = {id(u) for u in holm(decided, t.holm_m)}
    t.holm_stands = len(stand)
    for unit, members in headline if mark else []:
        if unit.verdict in ("PASS", "FAIL"):
            for v in members:
                if v.verdict == unit.verdict:
                    v.holm = STANDS if id(unit) in stand else NOT_AFTER_HOLM
    return t
