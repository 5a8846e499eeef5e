"""The judging step of a report: which runs count, every claim's verdict, and the arms' labels.

Kept apart from drawing and writing (:mod:`distrepro.report.build`) because everything after it reads the same
result: the figures, the Markdown (:mod:`distrepro.report.document`) and ``claims_verdict.json`` all show the
verdicts of one :class:`Judgement`, never a second judging of the runs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from distrepro.claims import model_interval
from distrepro.claims.attribution import attribute
from distrepro.claims.papers import PaperInfo
from distrepro.claims.runs import ReportError, RunSet
from distrepro.claims.schema import Scale
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
    #: the verdicts as every output shows them (:mod:`distrepro.claims.shown`): built once, after the timing
    #: verdicts that depend on an assumption are marked (:func:`distrepro.report.build.write_report`)
    display: Shown | None = None

    def figure_labels(self) -> dict[str, str]:
        """The labels of the shown scale's runs (every run's when that scale has none), so a bar never mixes
        scales."""
        at_shown = run_scales(self.rs.runs, self.shown) == self.shown
        kept = set(self.rs.runs.loc[at_shown, "run_id"])
        return {r: lab for r, lab in self.labels.items() if r in kept} or self.labels


def judge(info: PaperInfo, rs: RunSet, baseline: str | None, scale: Scale | None, root: Path | None) -> Judgement:
    """Keep the newest run per (arm config, seed), judge every claim at each scale the runs hold and at ``scale``
    (:mod:`distrepro.report.scales`), and check that ``baseline`` names an arm (a :class:`ReportError` listing
    the arms if not)."""
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
    )


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
    return preregistration_section(info.spec, info.path, judged.shown, [int(x) for x in done])
