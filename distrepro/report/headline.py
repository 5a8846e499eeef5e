"""The report's first screen: what a reader came for, before any table.

Reports run to dozens of screens (Chao's: 18 arms, 26 screens); the old first screen held the title,
the campaign ids in hex and the top of a ten-column table whose verdict sat in column eight. Now it
holds one sentence per headline claim (the paper's own, as it states them), verdict first: whether it
holds, what was measured (with its interval and seeds) against what the paper claims, and at which
scale and on which emulated cluster that was decided. Where the data came from (experiment, campaign
runs, tracking store) is folded into a ``<details>`` block: the HTML renderer turns the marker
paragraphs written here into the element (:func:`distrepro.report.html.render_html`), and Markdown viewers
that render HTML (GitHub's) fold it too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from distrepro.claims.attribution import APART
from distrepro.claims.evidence import VERDICTS, group_of
from distrepro.claims.sequential import level_text
from distrepro.claims.shown import Shown, ShownVerdict, show, shown_row
from distrepro.claims.tally import INCONSISTENT, Tally, inconsistent_text
from distrepro.claims.verdicts import Verdict, fmt
from distrepro.report.claims_sections import claimed_text, qualifier, source_text, where_decided

#: the verdict about the paper, said as a reader would say it (other evidence: distrepro.claims.attribution.SAID)
SAID = {"PASS": "holds", "FAIL": "does not hold", "INCONCLUSIVE": "cannot be decided"}
DETAILS_OPEN = "<details><summary>{summary}</summary>"
DETAILS_CLOSE = "</details>"


def _measured(v: Verdict, claim: Any) -> str:
    level = v.ci_level if v.ci_level is not None else claim.accept.ci
    if v.statistic is None or (isinstance(v.statistic, float) and math.isnan(v.statistic)):
        listed = {s for d in (*v.per_seed.values(), *v.censored.values()) for s in d}
        if not listed:
            return "nothing measured"
        usable = v.n_seeds or len(listed)
        need = claim.accept.min_seeds
        short = f", fewer than the {need} the claim needs" if need and usable < need else ""
        return f"{usable} seed{'s' if usable != 1 else ''} measured{short} (per-seed values in the claim details)"
    lower = "≥ " if v.statistic_name.startswith("lower bound") else ""
    text = f"measured {lower}{fmt(v.statistic, v.unit)}"
    seeds = f"{v.n_seeds} seed{'s' if v.n_seeds != 1 else ''}"
    if v.ci is not None and all(math.isfinite(c) for c in v.ci) and v.ci[0] != v.ci[1]:
        return text + f" [{fmt(v.ci[0], v.unit)}, {fmt(v.ci[1], v.unit)}] ({level_text(level)}, {seeds})"
    return text + f" ({seeds})"


_EMPHASIS = str.maketrans({"*": "\\*", "_": "\\_", "\n": " ", "\r": " "})


def claim_sentence(claim: Any, v: Verdict, row: ShownVerdict | None = None) -> str:
    """``**FAIL** · not reproduced on the proxy: <claim> (<id>; <source>): measured … against claimed …; decided
    at … .``: the word and its words from the claim's shown verdict (:mod:`distrepro.claims.shown`)."""
    if row is None:
        row = shown_row(claim, v)
    what = (claim.statement or f"{claim.kind} of {getattr(claim, 'metric', '') or claim.id}").translate(_EMPHASIS)
    if v.post_hoc:  # a choice that decides it was made after its record: shown, never counted
        text = f"**POST HOC** · {v.verdict}, not counted ({v.post_hoc}): "
    else:
        text = f"**{row.word}** · {row.said}: "  # DEPENDS: no PASS/FAIL badge, the emulated one said in words
    text += f"*{what}* ({claim.id}; {source_text(claim)}): "
    text += f"{_measured(v, claim)} against claimed {claimed_text(claim)}"
    text += f"; decided at {claim.scale} scale on {where_decided(claim, v)}"
    extra = qualifier(v, row)
    if extra:
        text += f" ({extra})"
    if v.verdict != "PASS":
        text += f" — {v.reason}"
    return text.replace("\n", " ").rstrip(".") + "."


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def first_screen(spec: Any, verdicts: Sequence[Verdict], shown: Shown | None = None) -> str:
    """The tally and one sentence per headline claim (empty when the paper encodes no claims); ``shown``: the
    verdicts as every output shows them (built here when not given)."""
    if spec is None or not spec.claims:
        return ""
    by_id = {v.claim_id: v for v in verdicts}
    heads = [c for c in spec.claims if group_of(c) == "headline" and c.id in by_id]
    shown = shown or show(spec, verdicts)
    t = shown.tally
    counts = t.of("headline")
    split = t.fails.get("headline", {})
    fail = _count(counts["FAIL"], "does not hold", "do not hold")
    if counts["FAIL"]:
        odd = split.get(INCONSISTENT, 0)
        both = f", {odd} {INCONSISTENT}: {inconsistent_text(odd)}" if odd else ""
        fail += f" ({split.get('falls short', 0)} falling short, {split.get('exceeds', 0)} exceeding it{both})"
    depends = t.depends.get("headline", 0)
    dep = f", {_count(depends, 'depends', 'depend')} on an assumed hardware figure" if depends else ""
    n_units = t.total("headline")
    merged = f" (counted once per claim the paper makes: {len(heads)} rows)" if n_units != len(heads) else ""
    about = " as evidence about the paper" if t.apart else ""
    lines = [
        f"**Of the paper's {_count(n_units, 'headline claim', 'headline claims')}{merged}{about}: "
        f"{_count(counts['PASS'], 'holds', 'hold')}, {fail}, "
        f"{_count(counts['INCONCLUSIVE'], 'cannot be decided', 'cannot be decided')}{dep}**"
        f"{_apart(t)}{_left_out(t)} (the claims tables and evidence follow). "
        f"{t.holm_text()[0].upper()}{t.holm_text()[1:]}.",
        "",
    ]
    lines += [f"- {claim_sentence(c, by_id[c.id], shown.of(c.id))}" for c in heads]
    outside, others = outside_headline(t)
    if others:
        lines += [
            "",
            f"_Also judged, outside the headline: {outside} over the other {_count(others, 'claim', 'claims')}._",
        ]
    return "\n".join(lines) + "\n"


def _left_out(t: Tally) -> str:
    """``; 1 more is post hoc and not counted`` (the headline's post-hoc verdicts: marked below, never counted)."""
    n = t.post_hoc.get("headline", 0)
    return f"; {n} more {'is' if n == 1 else 'are'} post hoc and not counted" if n else ""


def _apart(t: Tally) -> str:
    """``; not evidence about the paper: 2 not reproduced on the emulated setting, …``: the headline units kept
    apart by what they are about."""
    if not t.apart:
        return " on the emulated hardware"
    parts = []
    for about, counts in t.apart.items():
        n = sum(counts.values())
        said = " · ".join(f"{c} {k}" for k, c in counts.items() if c)
        parts.append(f"{n} {APART.get(about, about)} ({said})")
    return "; apart, not evidence about the paper: " + "; ".join(parts)


def outside_headline(t: Tally) -> tuple[str, int]:
    """The verdicts of the claims outside the headline (derived readings, structural checks) and how many there
    are, counted as the tally counts (once per unit): the headline's own are counted above and not again here."""
    groups = [g for g in (*t.counts, *t.depends) if g != "headline"]
    counts = {k: sum(t.of(g)[k] for g in dict.fromkeys(groups)) for k in VERDICTS}
    depends = sum(t.depends.get(g, 0) for g in dict.fromkeys(groups))
    text = t.text(counts) + (f" · {depends} depend{'s' if depends == 1 else ''} on an assumption" if depends else "")
    return text, sum(counts.values()) + depends


def folded(summary: str, body: str) -> str:
    """``body`` folded under ``summary`` (a ``<details>`` element in the HTML report)."""
    return "\n".join([DETAILS_OPEN.format(summary=summary), "", body.strip(), "", DETAILS_CLOSE, ""])


def provenance(info: Any, rs: Any, n_done: int, generated: str, version: str) -> str:
    """Where the report's data came from, folded: ids matter to someone re-running it, not to a reader."""
    campaigns = ", ".join(f"`{c}`" for c in rs.campaigns) or "–"
    body = (
        f"Paper `{info.id}` · experiment `{rs.experiment}` · tracking `{rs.tracking_uri}` · {len(rs.runs)} runs "
        f"({n_done} finished) · generated {generated} by distrepro {version} from MLflow alone.\n\n"
        f"Campaign runs (one per arm): {campaigns}"
    )
    return folded(f"Data: {len(rs.runs)} runs in {len(rs.campaigns)} campaign runs of `{rs.experiment}`", body)
