"""One report per paper across scales: which runs count, and each claim judged at every scale it has runs for.

A paper's store holds runs of several scales (the proxy default, ``--scale mid`` for the accuracy claims, ``gpu``
or ``paper``) and of several sessions (a re-run of a subset, a resumed campaign). A report rebuilt after any of
them must keep what the others decided, so the report reads every run of the paper's experiment and applies two
rules:

* **Which run stands for an (arm, seed)**: each (arm config, seed) — the config's sha256 (its tag
  ``distrepro.config_sha256``, seeds left out) and the seed — is represented by its newest FINISHED run, or its
  newest run if none finished. Repeating a session therefore replaces, seed by seed, what it repeats (the latest
  complete campaign) and leaves the rest; a run that failed never hides an earlier one that finished. The same
  rule picks a verdict's runs (:func:`distrepro.claims.verdicts.latest_per_seed`).
* **Which scale decides a claim**: every claim is judged at each scale the store has runs for (and at the scale
  asked for); the row's verdict is the PASS or FAIL of the largest such scale (``paper`` > ``gpu`` > ``mid`` >
  ``proxy``), else the verdict at the paper's own scale. The other scales' verdicts are named in its reason and
  listed in the table "Verdicts by scale"; a scale where some arm its claims read has no runs is marked partial.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from distrepro.claims.papers import PaperInfo, arms_at_scale
from distrepro.claims.schema import TRAINING_SCALES, PaperSpec, Scale, at_scale, claim_arms
from distrepro.claims.verdicts import Verdict, evaluate_claim
from distrepro.report import stage
from distrepro.report.next_steps import with_next_steps
from distrepro.sensitivity.columns import judged_table

#: larger scales first: the one whose decision a row shows when several decided
SCALE_ORDER: tuple[Scale, ...] = ("paper", "gpu", "mid", "proxy")
_CONFIG_TAG = "tags.distrepro.config_sha256"


def latest_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """One run per (arm config, seed): its newest FINISHED run, else its newest (the module's first rule).

    Runs without a config digest (older stores) are keyed by their campaign name, method, profile, variant, scale
    and params instead."""
    if runs.empty:
        return runs
    key = runs[_CONFIG_TAG] if _CONFIG_TAG in runs else pd.Series(None, index=runs.index, dtype=object)
    named = ["campaign", "method", "profile", "profile_variant", "scale"]
    fields = runs.reindex(columns=named + sorted(c for c in runs if c.startswith("params."))).astype(object)
    fields = fields.where(fields.notna(), "").astype(str)  # not fillna(""): pandas warns it will stop downcasting
    fallback = fields.agg("|".join, axis=1)
    identity = key.where(key.notna() & (key.astype(str) != ""), fallback).astype(str) + "#" + runs["seed"].astype(str)
    rank = runs.assign(
        _identity=identity,
        _finished=(runs["status"] == "FINISHED").astype(int),
        _start=runs.get("start_time", 0),
    ).sort_values(["_identity", "_finished", "_start"], kind="stable")
    kept = rank.drop_duplicates("_identity", keep="last").index
    return runs.loc[sorted(kept)].reset_index(drop=True)


def run_scales(runs: pd.DataFrame, default: str) -> pd.Series:
    """Each run's scale (its tag ``distrepro.scale``; a run without one counts at ``default``)."""
    if "scale" not in runs:
        return pd.Series(default, index=runs.index, dtype=object)
    return runs["scale"].fillna(default).replace("", default).astype(str)


@dataclass
class ScaledVerdicts:
    """The claims judged at every scale: ``spec`` with each claim at the scale that decided it, ``verdicts`` in
    ``spec.claims`` order, ``by_scale`` scale → claim id → verdict, ``missing`` scale → arms without runs there."""

    spec: PaperSpec
    verdicts: list[Verdict]
    by_scale: dict[str, dict[str, Verdict]] = field(default_factory=dict)
    missing: dict[str, list[str]] = field(default_factory=dict)

    def partial(self, scale: str) -> bool:
        return bool(self.missing.get(scale))


def _moved(info: PaperInfo, scales: list[str], root: Path | None) -> dict[str, PaperSpec]:
    """Per scale, the spec moved there (:func:`at_scale`, its sequential plan's level) with only the claims that
    scale judges itself (the mid scale keeps timing claims at proxy); scales that judge none are left out."""
    spec = info.spec
    assert spec is not None
    out = {}
    for scale in scales:
        available = arms_at_scale(info, scale, root) if scale in TRAINING_SCALES else None
        moved = at_scale(spec, scale, available)  # type: ignore[arg-type]
        moved = _with_plan(info, moved, scale)  # a declared sequential plan sets the scale's interval level
        mine = [c for c in moved.claims if c.scale == scale]
        if mine:
            out[scale] = moved.model_copy(update={"claims": mine})
    return out


def _ordered(scales: Iterable[str]) -> list[str]:
    have = set(scales)
    return [s for s in SCALE_ORDER if s in have]


def judge_across_scales(
    info: PaperInfo,
    runs: pd.DataFrame,
    curves: pd.DataFrame | None,
    asked: Scale | None = None,
    root: Path | None = None,
) -> ScaledVerdicts:
    """Judge ``info``'s claims at its own scale, at ``asked`` and at every scale ``runs`` hold (the module's
    second rule). ``info.spec`` must be the paper's spec as written (not already moved with :func:`at_scale`)."""
    spec = info.spec
    assert spec is not None
    own = spec.setup.scale
    pinned = {c.scale for c in spec.claims if c.scale}  # a claim pinned to a scale is judged there, runs or not
    scales = _ordered({own, *pinned, *([asked] if asked else []), *run_scales(runs, own)})
    by_scale: dict[str, dict[str, Verdict]] = {}
    claims_at: dict[str, dict[str, object]] = {}
    moved_to = _moved(info, scales, root)
    stage.count(f"at {', '.join(moved_to)}", sum(len(m.claims) for m in moved_to.values()), unit="claim")
    for scale, mine in moved_to.items():
        verdicts = []
        table = judged_table(mine, runs)  # the columns the verdicts read: the same verdicts, ~5x faster
        for claim in mine.claims:  # one at a time: each is a counted unit of the step
            verdicts.append(evaluate_claim(claim, mine, table, curves, info.id))
            stage.advance()
        by_scale[scale] = {v.claim_id: v for v in verdicts}
        claims_at[scale] = {c.id: c for c in mine.claims}
    present = set(run_scales(runs, own))
    missing = {
        scale: sorted(
            {a for c in claims_at[scale].values() for a in claim_arms(c)} - _arms_with_runs(runs, spec, scale)
        )
        for scale in by_scale
        if scale in present
    }
    chosen_claims, chosen = [], []
    base = at_scale(spec, asked or own, arms_at_scale(info, asked, root) if asked in TRAINING_SCALES else None)
    for claim in base.claims:
        judged = [(s, by_scale[s][claim.id]) for s in by_scale if claim.id in by_scale[s]]
        if not judged:  # cannot happen (every claim moves to some scale), but a row must not vanish
            continue
        scale, verdict = deciding_verdict(judged, claim.scale)
        others = [f"{s}: {v.verdict}" for s, v in judged if s != scale]
        if others:
            verdict = dataclasses.replace(verdict, reason=_join(verdict.reason, f"at other scales {', '.join(others)}"))
        chosen_claims.append(claims_at[scale][claim.id])
        chosen.append(verdict)
    chosen = with_next_steps(info, chosen_claims, chosen, root)  # every INCONCLUSIVE names what would decide it
    merged = base.model_copy(update={"claims": chosen_claims})
    return ScaledVerdicts(merged, chosen, by_scale, {s: m for s, m in missing.items() if m})


def deciding_verdict(judged: list[tuple[str, Verdict]], own: str | None) -> tuple[str, Verdict]:
    """Which of a claim's verdicts (scale, verdict), in any order, the report shows (the module's second rule): the
    decided one of the largest scale; undecided everywhere, that of the largest scale whose runs were inside the
    regime (an interval that straddles at mid says what would decide it, "outside the regime" at proxy does not);
    else the claim's own scale's, else the largest's. Sorted here, so the choice never depends on the order the
    scales were judged in."""
    judged = sorted(judged, key=lambda sv: SCALE_ORDER.index(sv[0]) if sv[0] in SCALE_ORDER else len(SCALE_ORDER))
    decided = [(s, v) for s, v in judged if v.verdict != "INCONCLUSIVE"]
    if decided:
        return decided[0]
    in_regime = [(s, v) for s, v in judged if not v.out_of_regime and v.n_seeds]
    if in_regime:
        return in_regime[0]
    return next(((s, v) for s, v in judged if s == own), judged[0])


def _with_plan(info: PaperInfo, spec: PaperSpec, scale: str) -> PaperSpec:
    """``spec`` with the interval level of ``scale``'s pre-registered sequential plan (Pocock), if one is declared
    (:mod:`distrepro.claims.sequential`, :mod:`distrepro.report.preregistration_section`)."""
    from distrepro.claims.sequential import apply_plan
    from distrepro.report.preregistration_section import load_scale_record

    _, record = load_scale_record(info.path, scale)
    return apply_plan(spec, (record or {}).get("sequential"), scale)


def _join(reason: str, extra: str) -> str:
    return f"{reason.rstrip('. ')}; {extra}" if reason else extra


def _arms_with_runs(runs: pd.DataFrame, spec: PaperSpec, scale: str) -> set[str]:
    from distrepro.claims.verdicts import select_arm

    return {name for name in spec.setup.arms if not select_arm(runs, spec, name, None, scale).empty}


def scale_table(scaled: ScaledVerdicts, groups: Mapping[str, str]) -> str:
    """Markdown: with several scales judged, one row per claim and one column per scale (``–``: the claim is not
    judged there); then a line per partial scale naming the arms it lacks (empty when there is nothing to say)."""
    from distrepro.report.sections import table

    scales = list(scaled.by_scale)
    lines = []
    if len(scales) > 1:
        rows = []
        for claim in scaled.spec.claims:
            row = {"claim": claim.id, "group": groups.get(claim.id, "headline")}
            for s in scales:
                v = scaled.by_scale[s].get(claim.id)
                row[_heading(scaled, s)] = v.verdict if v else "–"
            rows.append(row)
        lines += [table(rows, ["claim", "group", *(_heading(scaled, s) for s in scales)]), ""]
    for s, arms in scaled.missing.items():
        lines.append(f"- *{s} (partial)*: no runs at this scale of {', '.join(f'`{a}`' for a in arms)}.")
    return "\n".join(lines).rstrip() + "\n" if lines else ""


def _heading(scaled: ScaledVerdicts, scale: str) -> str:
    return f"{scale} (partial)" if scaled.partial(scale) else scale


def tallies_by_scale(scaled: ScaledVerdicts, groups: Mapping[str, str]) -> dict[str, dict[str, object]]:
    """Scale → counts of PASS/FAIL/INCONCLUSIVE over the headline claims and over all, and whether it is partial
    (``claims_verdict.json``'s ``by_scale``: the index shows it per paper)."""
    out: dict[str, dict[str, object]] = {}
    for scale, verdicts in scaled.by_scale.items():

        def count(vs: Sequence[Verdict]) -> dict[str, int]:
            return {k: sum(v.verdict == k for v in vs) for k in ("PASS", "FAIL", "INCONCLUSIVE")}

        heads = [v for cid, v in verdicts.items() if groups.get(cid, "headline") == "headline"]
        out[scale] = {"headline": count(heads), "all": count(list(verdicts.values())), "partial": scaled.partial(scale)}
    return out
