"""The report's claims sections as Markdown: the tally line, one table per evidence group, each claim's details.

Every sentence here is one a reader acts on, so the wording is tested (``tests/report``): a verdict says what
qualifies it (the direction of a FAIL, a hardware assumption it depends on, whether it stands after Holm),
where it was decided (a profile, never "any"), how many seeds would clear a straddled edge, and pairing by
seed is described as "the same initial model" only where the arms ran on the same profile.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from distrepro.claims.evidence import group_of
from distrepro.claims.intervals import CI_LABELS
from distrepro.claims.schema import Claim, PaperSpec, claimed_bounds
from distrepro.claims.sequential import level_text
from distrepro.claims.shown import Shown, ShownVerdict, qualifiers, show, shown_row
from distrepro.claims.verdicts import Verdict, fmt
from distrepro.report.results_inputs import SCALES
from distrepro.report.sections import table


def _claim_unit(claim: Any) -> str:
    if claim.kind == "speedup" or (claim.kind == "relative_improvement" and claim.form == "ratio"):
        return "x"
    if claim.kind == "relative_improvement":
        return "fraction" if claim.form == "fraction" else claim.metric
    if claim.kind == "convergence":
        return claim.unit
    return getattr(claim, "metric", "")


def claimed_text(claim: Any) -> str:
    unit = _claim_unit(claim)
    if claim.kind == "ordering":
        return (" > " if claim.direction == "max" else " < ").join(claim.arms) + f" on {claim.metric}"
    if claim.kind == "non_inferiority":
        kind = "" if claim.margin_kind == "abs" else " × baseline"
        return f"{claim.arm} ≥ {claim.baseline} − {fmt(claim.margin)}{kind} on {claim.metric}"
    lo, hi = claimed_bounds(claim.claimed) or (math.nan, math.nan)
    value = fmt(lo, unit) if lo == hi else f"{fmt(lo, unit)} – {fmt(hi, unit)}"
    suffix = f" {claim.unit}" if claim.kind == "convergence" else ""
    return value + suffix


def source_text(claim: Any) -> str:
    src = claim.source
    text = src.ref or src.kind
    return f'{text}: "{src.quote}"' if src.quote else text


def evidence_text(claim: Any) -> str:
    """``origin`` of the claim and, where it says more, where its number comes from (``evidence``)."""
    if claim.origin == claim.evidence:
        return claim.origin
    what = "number" if getattr(claim, "claimed", None) is not None else "statement"  # no number to take verbatim
    return f"{claim.origin} ({what} {claim.evidence})"


def reproduced_text(v: Verdict, level: float) -> str:
    if v.statistic is None:
        return "–"
    out = ("≥ " if v.statistic_name.startswith("lower bound") else "") + fmt(v.statistic, v.unit)
    if v.ci is not None and all(math.isfinite(c) for c in v.ci) and v.ci[0] != v.ci[1]:
        shown = v.ci_level if v.ci_level is not None else level
        out += f" [{fmt(v.ci[0], v.unit)}, {fmt(v.ci[1], v.unit)}] ({level_text(shown)})"
    return out + f", n={v.n_seeds}"


def where_decided(claim: Any, v: Verdict) -> str:
    """``profile `x``` for a claim pinned to one profile, else the profiles its arms' runs used (never "any")."""
    if claim.profile:
        return f"profile `{claim.profile}`"
    used = sorted({p for ps in v.arm_profiles.values() for p in ps})
    if not used:
        return "the profiles of its arms' runs"
    return f"profile{'s' if len(used) > 1 else ''} " + ", ".join(f"`{p}`" for p in used)


def qualifier(v: Verdict, row: ShownVerdict | None = None) -> str:
    """What a verdict rests on beyond its interval: a hardware assumption, the direction of a miss, Holm, post hoc
    (``row``: the claim's shown verdict, :mod:`distrepro.claims.shown`)."""
    return " · ".join(row.qualifiers if row is not None else qualifiers(None, v))


def _about_cell(row: ShownVerdict) -> str:
    """The verdict column: the word every output prints and, when not the paper, what it is evidence about."""
    return row.word if row.about == "paper" else f"{row.word} · {row.said}"


def claims_table(
    spec: PaperSpec, verdicts: Sequence[Verdict], claims: Sequence[Any] | None = None, shown: Shown | None = None
) -> str:
    """One row per claim (``claims``: a subset of ``spec.claims``, default all); a claim decided by
    the model's structure gets a ``why it cannot vary`` column. ``shown``: the verdicts as shown (a row's word,
    what it is about, its qualifiers)."""
    by_id = {v.claim_id: v for v in verdicts}
    chosen = list(spec.claims if claims is None else claims)
    structural = any(c.decided_by == "model_structure" for c in chosen)
    rows = []
    for claim in chosen:
        v = by_id[claim.id]
        shown_v = shown.of(claim.id) if shown is not None else shown_row(claim, v)
        extra = qualifier(v, shown_v)
        ideal = f"{fmt(claim.ideal.value, _claim_unit(claim))} ({claim.ideal.label})" if claim.ideal else "–"
        rows.append(
            {
                "claim": f"{claim.id}: {claim.statement}" if claim.statement else claim.id,
                "kind": claim.kind,
                "source": source_text(claim),
                "evidence": evidence_text(claim),
                "claimed": claimed_text(claim),
                "reproduced": reproduced_text(v, claim.accept.ci),
                "ideal": ideal,
                "scale": f"{claim.scale}" + (" · out of regime" if v.out_of_regime else ""),
                "verdict": _about_cell(shown_v),
                "reason": f"{extra} — {v.reason}" if extra else v.reason,
                "why it cannot vary": claim.why,
            }
        )
    cols = ["claim", "kind", "source", "evidence", "claimed", "reproduced", "ideal", "scale", "verdict", "reason"]
    return table(rows, [*cols, "why it cannot vary"] if structural else cols)


_GROUPS = {
    "headline": (
        "The paper's claims (headline)",
        "As the paper states them, each decided by a measurement on the emulated cluster.",
    ),
    "derived": (
        "Derived and reconstructed readings",
        "Computed from the paper's numbers (derived) or our reading of what it says without a number or a "
        "baseline (reconstructed): they re-use the headline's evidence, so they are not counted in it.",
    ),
    "structural": (
        "Decided by the model's structure",
        "Claims the emulator can only decide one way, whatever the runs do (the last column says why): "
        "their verdicts describe the model, not the paper, and are not counted in the headline.",
    ),
}


def _pairing_text(verdicts: Sequence[Verdict]) -> str:
    """How comparisons pair seeds; "same initial model" only where the arms ran on the same profile, "paired by
    seed" only where a verdict's seeds pair."""
    paired = [v for v in verdicts if v.paired]
    across = [v.claim_id for v in paired if v.across_profiles]
    same = "a seed index gives every arm the same initial model and data order"
    if not paired:
        return "No verdict here pairs seeds (each arm's seeds are a sample of their own)"
    if not across:
        return f"Comparisons are paired by seed ({same})"
    return (
        f"Comparisons are paired by seed ({same} on one profile; {', '.join(across)} compare arms on different "
        "profiles, where a seed index pairs runs on different clusters, not the same initial model)"
    )


def tally_text(spec: PaperSpec, verdicts: Sequence[Verdict], shown: Shown | None = None) -> str:
    """The report's verdict line, headline first (see :mod:`distrepro.claims.tally`), from ``shown`` (built here
    when not given)."""
    t = (shown or show(spec, verdicts)).tally
    where = f"profile `{spec.setup.profile}`, " if spec.setup.profile else ""
    # a report of every scale judges each claim at the scale that decided it: name those of the headline claims
    used = {c.scale or spec.setup.scale for c in spec.claims if group_of(c) == "headline"} or {spec.setup.scale}
    scales = sorted(used, key=lambda s: SCALES.index(s) if s in SCALES else len(SCALES))
    at = f"scale `{scales[0]}`" if len(scales) == 1 else "scales " + ", ".join(f"`{s}`" for s in scales)
    about = " about the paper" if t.apart else ""
    lines = [
        f"**Headline: {t.text(t.of('headline'), 'headline')}**{about} of the paper's {t.total('headline')} claims as "
        f"it states them, decided by measurement ({where}{at}){t.post_hoc_text('headline')}."
    ]
    if t.apart:
        lines.append(
            f"Counted apart, as evidence about something else than the paper: {t.apart_text()} (column `verdict`; "
            "docs/claims.md, what a verdict is evidence about)."
        )
    lines += _counting_rules(t)
    levels = sorted({v.ci_level for v in verdicts if v.ci_level is not None} or {0.95})
    lines.append(
        f"The {' or '.join(level_text(x).removesuffix(' CI') for x in levels)} interval decides: PASS when it lies "
        "wholly inside the acceptance band, FAIL when wholly outside, "
        f"INCONCLUSIVE when it straddles an edge; {t.holm_text()}."
    )
    others = [
        f"{t.text(t.of(g), g)} {label}"
        for g, label in (
            ("derived", "derived/reconstructed readings"),
            ("structural", "decided by the model's structure"),
        )
        if t.total(g)
    ]
    if others:
        lines.append(f"Also judged, not in the headline: {'; '.join(others)}.")
    outside = t.out_of_regime_total()
    if outside:
        lines.append(
            f"{outside} INCONCLUSIVE verdict(s) are outside the paper's regime (a regime condition unmet, or arms "
            "that tie on every seed): the runs cannot show the paper's effect, which is no evidence against it."
        )
    scales = sorted({c.scale for c in spec.claims if c.scale})
    if len(scales) > 1:
        per = ", ".join(f"{sum(c.scale == s for c in spec.claims)} at `{s}`" for s in scales)
        lines.append(f"Claims decided per scale: {per} (column `scale`).")
    counted = t.total()  # a claim that restates another's number (same_as / counts_with) counts once
    rows = ""
    if counted != len(verdicts):
        rows = f" ({len(verdicts)} rows, a claim restating another's number counted once)"
    lines.append(
        f"All {counted} claims{rows}: {t.text(t.all_claims())}. {_pairing_text(verdicts)}; the CI decides a verdict "
        "under `rule: ci`."
    )
    return " ".join(lines)


def _counting_rules(t: Any) -> list[str]:
    """The sentences that say why the tally counts fewer rows than the table has: merged units, verdicts that
    depend on an assumption, post-hoc verdicts (each only when it applies)."""
    lines = []
    if t.merged:
        lines.append(
            f"Claims that restate one number (`same_as`) or cannot both hold (`counts_with`) count once: {t.merged} "
            "row(s) are counted inside another claim's."
        )
    if t.depends:
        lines.append(
            "A timing verdict that PASSes in more than 5 % and fewer than 95 % of the plausible hardware settings "
            "depends on an assumed figure and is counted apart, not as PASS or FAIL (its share is in the table)."
        )
    if sum(t.post_hoc.values()):
        lines.append(
            "A verdict some choice of which was made after the pre-registration (its claim, a frozen input, the record "
            "itself) is post hoc: shown and marked, but not counted (see Pre-registration)."
        )
    return lines


def grouped_claims_tables(spec: PaperSpec, verdicts: Sequence[Verdict], shown: Shown | None = None) -> str:
    """One claims table per evidence group, the headline first."""
    out = []
    for group, (title, caption) in _GROUPS.items():
        claims = [c for c in spec.claims if group_of(c) == group]
        if claims:
            out += [f"### {title}", "", f"_{caption}_", "", claims_table(spec, verdicts, claims, shown)]
    return "\n".join(out)


def _arms_of(claim: Any) -> str:
    if claim.kind == "ordering":
        return "arms " + ", ".join(f"`{a}`" for a in claim.arms)
    base = getattr(claim, "baseline", None)
    return f"arm `{claim.arm}`" + (f" vs baseline `{base}`" if base else "")


def claim_details(spec: PaperSpec, verdicts: Sequence[Verdict], shown: Shown | None = None) -> str:
    """Per claim: what was compared where, the statistic and acceptance band, and every seed's value."""
    by_id = {v.claim_id: v for v in verdicts}
    out = []
    for claim in spec.claims:
        v = by_id[claim.id]
        acc = claim.accept
        said = shown.of(claim.id) if shown is not None else shown_row(claim, v)
        lines = [f"#### {claim.id} · {claim.kind} · **{said.word}** · {said.said}", ""]
        if claim.statement:
            lines += [f"> {claim.statement}", ""]
        lines.append(
            f"- {_arms_of(claim)} · {where_decided(claim, v)} · scale `{claim.scale}` · "
            f"origin `{claim.origin}` · evidence `{claim.evidence}` · decided by `{claim.decided_by}` · "
            f"source {source_text(claim)}"
        )
        if claim.why:
            lines.append(f"- why it cannot vary: {claim.why}")
        tol = f"abs ±{acc.abs_tolerance:g}, rel ±{acc.rel_tolerance:g}, {acc.sided}, rule `{acc.rule}`"
        method = CI_LABELS.get(v.ci_method or acc.ci_method or "", "interval")
        resamples = f" ({acc.n_boot} resamples)" if (v.ci_method or acc.ci_method) != "t" else ""
        lines.append(
            f"- statistic: {v.statistic_name or acc.statistic}; "
            f"{level_text(v.ci_level if v.ci_level is not None else acc.ci).removesuffix(' CI')} {method}{resamples}"
            f"; at least {acc.min_seeds} seeds; "
            f"tolerance {tol}"
        )
        if v.band is not None:
            lines.append(f"- acceptance band: [{fmt(v.band[0], v.unit)}, {fmt(v.band[1], v.unit)}]")
        lines.append(f"- decided at scale `{claim.scale}`; verdict reason: {v.reason}")
        lines += _rule_lines(v)
        lines += regime_lines(claim, v)
        if claim.notes:
            lines.append(f"- notes: {claim.notes}")
        arms = list(dict.fromkeys([*v.per_seed, *v.censored]))
        seeds = sorted({s for d in (*v.per_seed.values(), *v.censored.values()) for s in d} | set(v.points))
        if seeds:
            rows = []
            for s in seeds:
                row: dict[str, Any] = {"seed": s}
                for arm in arms:
                    cens = v.censored.get(arm, {})
                    row[arm] = (
                        f"≥ {fmt(cens[s])} (target not reached)" if s in cens else fmt(v.per_seed.get(arm, {}).get(s))
                    )
                if v.points and len(v.per_seed) > 1:
                    row["per-seed value"] = fmt(v.points.get(s), v.unit)
                rows.append(row)
            cols = ["seed", *arms] + (["per-seed value"] if v.points and len(v.per_seed) > 1 else [])
            lines += ["", table(rows, cols)]
        out.append("\n".join(lines))
    return "\n\n".join(out) + "\n"


def _rule_lines(v: Verdict) -> list[str]:
    """The decision's error and diagnostics: one-sided p and Holm, seeds to clear an edge, skew of the values."""
    lines = []
    if v.p_value is not None and v.verdict in ("PASS", "FAIL"):
        holm = f"; {v.holm} after Holm's step-down over the headline claims" if v.holm else ""
        lines.append(f"- one-sided test at 2.5 %: p = {v.p_value:.2g} (t approximation on the interval's scale){holm}")
    if v.seeds_needed is not None:
        guard = (
            "; the new run's interval is skew-guarded, so t·f(n), s from the plain t-interval"
            if v.plain_ci is not None
            else ""
        )
        lines.append(
            f"- seeds to clear the edge in a new run: about {v.seeds_needed} (n ≈ (t·s/d)², s the per-seed spread the "
            f"interval implies, d the distance from the statistic to the edge{guard}; a plan, not a licence to add "
            "seeds)"
        )
    if v.model_interval is not None:  # the emulator's own error, beside the seed interval
        low, high = v.model_interval
        held = "holds at every corner" if not v.within_model_error else "does not hold at every corner: INCONCLUSIVE"
        lines.append(
            f"- model interval (the emulator's validated error, out of sample): [{fmt(low, v.unit)}, "
            f"{fmt(high, v.unit)}]; the seed verdict {held}; bands: {v.model_basis}"
        )
    if v.skew is not None and math.isfinite(v.skew):
        warn = " (|G1| ≥ 1: the interval's two one-sided errors may be unequal)" if abs(v.skew) >= 1 else ""
        lines.append(f"- skewness of the per-seed values on the interval's scale: G1 = {v.skew:.2f}{warn}")
    return lines


def regime_lines(claim: Any, v: Verdict) -> list[str]:
    """The claim's regime checks (suite/claims/regime.py), measured on the deciding runs; a condition
    the verdict stopped before (an earlier one unmet, or arms missing) is listed as not checked."""
    if not claim.regime:
        return []
    done = {c.id: c for c in v.regime}
    lines = ["- regime checks (from the paper's setting, fixed before the runs):"]
    for cond in claim.regime:
        check = done.get(cond.id)
        text = check.text() if check is not None else f"{cond.what}: not checked"
        lines.append(f"  - `{cond.id}`: {text} — source: {cond.source}")
    return lines


def conflicts_section(spec: PaperSpec) -> str:
    """Claims the paper makes that cannot all hold under the checker's definitions (declared in YAML)."""
    seen, lines = set(), []
    by_id: dict[str, Claim] = {c.id: c for c in spec.claims}
    for c in spec.claims:
        for other in c.conflicts_with:
            pair = tuple(sorted((c.id, other)))
            if pair in seen:
                continue
            seen.add(pair)
            notes = "; ".join(n for n in (c.notes, by_id[other].notes) if n)
            lines.append(f"- **{pair[0]}** and **{pair[1]}**" + (f": {notes}" if notes else ""))
    return "\n".join(lines) + "\n" if lines else ""
