"""The judging step of a report: which runs count, every claim's verdict, and the arms' labels.

Kept apart from drawing and writing (:mod:`distrepro.report.build`) because everything after it reads the same
result: the figures, the Markdown (:mod:`distrepro.report.document`) and ``claims_verdict.json`` all show the
verdicts of one :class:`Judgement`, never a second judging of the runs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from distrepro.claims import model_interval
from distrepro.claims.attribution import attribute
from distrepro.claims.papers import PaperInfo, arms_at_scale
from distrepro.claims.runs import ReportError, RunSet
from distrepro.claims.schema import TRAINING_SCALES, Scale, at_scale
from distrepro.claims.shown import Shown
from distrepro.claims.verdicts import Verdict, judge_values
from distrepro.report.figure_set import arm_labels, report_style
from distrepro.report.scales import ScaledVerdicts, judge_across_scales, latest_runs, run_scales


@dataclass
class Judgement:
    """What the report shows: the runs that count, the verdicts, and for which scale the figures are drawn."""

    #: the paper with its spec as judged at the scales the runs hold (``info.spec`` None: a paper without claims)
    info: PaperInfo
    #: the runs, each (arm config, seed) once: its newest finished run (:func:`distrepro.report.scales.latest_runs`)
    rs: RunSet
    #: run id -> the arm's label in tables and figures
    labels: dict[str, str]
    verdicts: list[Verdict]
    #: every claim judged at every scale (None without claims)
    scaled: ScaledVerdicts | None
    #: the arm the speedup figure divides by
    baseline: str | None
    #: the scale whose runs the figures show
    shown: str
    #: an exploratory report: at a registered scale it judges only the runs on seeds outside the record
    exploratory: bool = False
    #: scale → the seeds of runs left out at that scale (outside the record, or, exploratory, inside it)
    set_aside: dict[str, list[int]] = field(default_factory=dict)
    #: scale → what its record certifies (:func:`distrepro.claims.certification.standing`), registered scales only
    standings: dict[str, Any] = field(default_factory=dict)
    #: the verdicts as every output shows them (:mod:`distrepro.claims.shown`): built once, after the timing
    #: verdicts that depend on an assumption are marked (:func:`distrepro.report.build.write_report`)
    display: Shown | None = None
    #: every run the report may judge before the newest per (arm config, seed) is kept: superseded and failed runs
    #: were seen too, so a record is compared with the first of them (:func:`mark_post_hoc`)
    seen: pd.DataFrame | None = None

    def figure_labels(self) -> dict[str, str]:
        """The labels of the shown scale's runs (every run's when that scale has none), so a bar never mixes
        scales."""
        at_shown = run_scales(self.rs.runs, self.shown) == self.shown
        kept = set(self.rs.runs.loc[at_shown, "run_id"])
        return {r: lab for r, lab in self.labels.items() if r in kept} or self.labels


def registered_runs(info: PaperInfo, rs: RunSet, exploratory: bool = False) -> tuple[RunSet, dict[str, list[int]]]:
    """The runs a report may judge, and per scale the seeds it leaves out. At a scale with a pre-registration record
    the registered report judges only the runs on the record's seeds, so that an exploratory session (``reproduce
    --seeds 0``, a pilot) never enters a confirmatory verdict; the exploratory report (``exploratory``) judges only
    the others. Scales without a record keep every run (their verdicts are all exploratory)."""
    from distrepro.report.preregistration_section import load_scale_record

    runs = rs.runs
    if info.spec is None or runs.empty or "seed" not in runs.columns:
        return rs, {}
    scales = run_scales(runs, info.spec.setup.scale)
    keep = pd.Series(True, index=runs.index)
    set_aside: dict[str, list[int]] = {}
    for scale in sorted(set(scales)):
        _, record = load_scale_record(info.path, scale)
        if record is None:
            continue
        registered = {int(s) for s in record.get("seeds") or []}
        seeds = pd.to_numeric(runs["seed"], errors="coerce")
        inside = seeds.isin(registered)
        drop = (scales == scale) & (inside if exploratory else ~inside)
        if drop.any():
            set_aside[scale] = sorted({int(x) for x in seeds[drop].dropna()})
        keep &= ~drop
    if keep.all():
        return rs, set_aside
    return dataclasses.replace(rs, runs=runs.loc[keep].reset_index(drop=True)), set_aside


def judge(
    info: PaperInfo,
    rs: RunSet,
    baseline: str | None,
    scale: Scale | None,
    root: Path | None,
    exploratory: bool = False,
) -> Judgement:
    """Keep the runs the report may judge (:func:`registered_runs`) and of them the newest run per (arm config,
    seed), judge every claim at each scale the runs hold and at ``scale`` (:mod:`distrepro.report.scales`), and
    check that ``baseline`` names an arm (a :class:`ReportError` listing the arms if not)."""
    rs, set_aside = registered_runs(info, rs, exploratory)
    seen = rs.runs
    rs = dataclasses.replace(rs, runs=latest_runs(rs.runs))
    scaled = judge_across_scales(info, rs.runs, rs.curves, scale, root) if info.spec else None
    if scaled is not None:
        info = dataclasses.replace(info, spec=scaled.spec)
        _attribute(info, scaled.verdicts)
    spec = info.spec
    labels = arm_labels(rs.runs, spec)
    if baseline is not None and baseline not in set(labels.values()):
        known = ", ".join(report_style(rs.runs, labels, spec).order)
        raise ReportError(f"unknown baseline arm {baseline!r} for --baseline; known arms: {known}")
    return Judgement(
        info,
        rs,
        labels,
        scaled.verdicts if scaled else [],
        scaled,
        baseline or (spec.setup.baseline if spec else None),
        scale or (spec.setup.scale if spec else "proxy"),
        exploratory,
        set_aside,
        seen=seen,
    )


def _first_confirmatory_run(runs: pd.DataFrame, scale: str, default: str, seeds: list[int]) -> tuple[Any, list[str]]:
    """The first run at ``scale`` on the record's ``seeds`` (:class:`distrepro.claims.seed_history.SeedUse`, None
    without such runs), and what cannot be checked: runs on those seeds that record no start."""
    from distrepro.claims.seed_history import first_uses

    if runs.empty or "seed" not in runs.columns:
        return None, []
    uses = first_uses(runs.loc[run_scales(runs, default) == scale], seeds)
    undated = ", ".join(str(u.seed) for u in uses if u.started is None)
    unchecked = [f"runs on seed(s) {undated} record no start: whether the record preceded them is unknown"]
    dated = [u for u in uses if u.started is not None]
    return (dated[0] if dated else None), unchecked if undated else []


def mark_post_hoc(judged: Judgement, written: PaperInfo, root: Path | None, samples: int | None = None) -> None:
    """Set each verdict's ``post_hoc`` (why, empty if not) and ``not_frozen`` from its scale's record
    (:func:`distrepro.claims.certification.standing`): a claim changed since, a record newer than the runs it
    judges or replacing an earlier one, a frozen input changed; ``samples`` is the sensitivity check's draw (None
    when none ran). ``written`` is the paper as written (its spec not moved to a scale). The exploratory report is
    not the registered test: nothing to certify there."""
    from distrepro.claims.certification import check_claims, standing
    from distrepro.claims.preregistration import frozen_now
    from distrepro.report.preregistration_section import load_scale_record

    spec, paper_file = judged.info.spec, judged.info.path
    if spec is None or written.spec is None or paper_file is None or judged.exploratory:
        return
    by_id = {v.claim_id: v for v in judged.verdicts}
    for scale in dict.fromkeys(c.scale for c in spec.claims if c.scale):
        _, record = load_scale_record(paper_file, scale)
        if record is None:
            continue
        ids = [c.id for c in spec.claims if c.scale == scale and c.id in by_id]
        available = arms_at_scale(written, scale, root) if scale in TRAINING_SCALES else None
        now = frozen_now(paper_file, at_scale(written.spec, scale, available), scale, root)
        seeds = [int(s) for s in record.get("seeds") or []]
        runs = judged.seen if judged.seen is not None else judged.rs.runs
        first, unchecked = _first_confirmatory_run(runs, scale, spec.setup.scale, seeds)
        st = standing(record, check_claims(record, paper_file, ids), now, first, samples, unchecked)
        judged.standings[scale] = st
        for cid in ids:
            by_id[cid].post_hoc = st.post_hoc.get(cid, "")
            by_id[cid].not_frozen = bool(st.not_frozen) and not by_id[cid].post_hoc


def _attribute(info: PaperInfo, verdicts: list[Verdict]) -> None:
    """The emulator's error on every timing verdict (:mod:`distrepro.claims.model_interval`: a model interval, and
    INCONCLUSIVE where a corner of the error does not share the verdict), then what each verdict is evidence about
    (:mod:`distrepro.claims.attribution`); before any tally or dependence mark reads them."""
    spec, paper = info.spec, info.id
    assert spec is not None
    model_interval.check_all(spec, paper, verdicts, lambda claim, arms: judge_values(claim, arms, paper))
    attribute(spec, verdicts)


def preregistration(judged: Judgement) -> str:
    """The shown scale's frozen record stamped into the report (:mod:`distrepro.report.preregistration_section`):
    which verdicts a record fixed in advance decided, which seeds it named, and every choice made after seeing
    them. Empty for a paper without claims."""
    from distrepro.report.preregistration_section import preregistration_section

    info, runs = judged.info, judged.rs.runs
    if info.spec is None:
        return ""
    has_seeds = len(runs) and {"seed", "status"} <= set(runs.columns)
    at = run_scales(runs, info.spec.setup.scale) == judged.shown if has_seeds else None
    done = runs.loc[(runs["status"] == "FINISHED") & at, "seed"].dropna() if has_seeds else []
    return preregistration_section(
        info.spec,
        info.path,
        judged.shown,
        [int(x) for x in done],
        standing=judged.standings.get(judged.shown),
        set_aside=judged.set_aside.get(judged.shown, []),
        exploratory=judged.exploratory,
    )
