"""The report's figures as a set: which arm each run is, one style (colour, marker) per arm in every figure, every
figure the runs support, their file names and the words under each.

Apart from :mod:`distrepro.report.build` (which writes the report) because choosing and drawing the figures is
one concept, and the figures themselves are drawn by :mod:`distrepro.report.figures`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from distrepro import metrics as M
from distrepro.claims.papers import PaperInfo
from distrepro.claims.runs import RunSet
from distrepro.claims.schema import PaperSpec
from distrepro.claims.verdicts import Verdict, select_arm
from distrepro.report import figures as figs
from distrepro.report.speedup_references import speedup_marks, speedup_references
from distrepro.tracking.runlog import flatten_params


def arm_labels(runs: pd.DataFrame, spec: PaperSpec | None) -> dict[str, str]:
    """Run id → arm name for figures: the most specific ``setup.arms`` entry a run matches, else its
    method; `` @ <profile>`` is appended to the arms whose runs span several profiles (an arm bound
    to one profile, as each of Chao's, keeps its short name: the suffix would only crowd the axes)."""
    labels = dict(zip(runs["run_id"], runs["method"], strict=True))
    best: dict[str, int] = {}
    for name, arm in (spec.setup.arms if spec else {}).items():
        specificity = len(flatten_params({"p": arm.params})) + (arm.campaign is not None)
        for run_id in select_arm(runs, spec, name, None, None)["run_id"]:  # type: ignore[arg-type]
            if specificity >= best.get(run_id, -1):
                labels[run_id], best[run_id] = name, specificity
    profiles = dict(zip(runs["run_id"], runs["profile"], strict=True))
    spread = runs.assign(arm=runs["run_id"].map(labels)).groupby("arm")["profile"].nunique()
    return {r: f"{lab} @ {profiles[r]}" if spread[lab] > 1 else lab for r, lab in labels.items()}


def report_style(runs: pd.DataFrame, labels: dict[str, str], spec: PaperSpec | None) -> figs.ArmStyle:
    """The one arm → colour (and order) mapping every figure of the report uses: arms in the order
    ``setup.arms`` lists them (the paper file groups them, e.g. Chao's by scenario), others sorted;
    grouped by profile so figures can facet arms that ran on the same emulated cluster."""
    declared = list(spec.setup.arms) if spec else []
    rank = {name: i for i, name in enumerate(declared)}
    arms = sorted(set(labels.values()), key=lambda a: (rank.get(a.split(" @ ")[0], len(rank)), a))
    profiles = (
        runs.assign(arm=runs["run_id"].map(labels))
        .groupby("arm")["profile"]
        .agg(lambda p: ", ".join(sorted(set(p.dropna().astype(str)))))
    )
    return figs.arm_style(arms, profiles.to_dict())


def representatives(runs: pd.DataFrame, labels: dict[str, str]) -> dict[str, str]:
    """One finished run per arm (lowest seed) for the timeline and README."""
    done = runs[runs["status"] == "FINISHED"].sort_values(["seed", "start_time"])
    out: dict[str, str] = {}
    for run_id in done["run_id"]:
        if run_id in labels:  # the figures' labels cover one scale's runs
            out.setdefault(labels[run_id], run_id)
    return out


def draw_figures(
    info: PaperInfo,
    rs: RunSet,
    labels: dict[str, str],
    verdicts: list[Verdict],
    baseline: str | None,
    style: figs.ArmStyle | None = None,
) -> dict[str, Any]:
    """Every figure the runs support, as matplotlib figures keyed like :data:`FIGURE_FILES`, all
    drawn with one :class:`ArmStyle` so an arm has the same colour in each."""
    drawn = {k: make() for k, make in figure_makers(info, rs, labels, verdicts, baseline, style).items()}
    return {k: v for k, v in drawn.items() if v is not None}


def figure_makers(
    info: PaperInfo,
    rs: RunSet,
    labels: dict[str, str],
    verdicts: list[Verdict],
    baseline: str | None,
    style: figs.ArmStyle | None = None,
) -> dict[str, Callable[[], Any]]:
    """What :func:`draw_figures` draws, one call per figure (``None`` where the runs do not support it), so that the
    report draws and saves each in turn and counts them as it goes."""
    spec = info.spec
    style = style or report_style(rs.runs, labels, spec)
    reps = representatives(rs.runs, labels)
    refs = speedup_references(spec, baseline, style)
    return {
        "curves_emulated_time": lambda: figs.curves_figure(rs.curves, labels, style, M.EMULATED_S),
        "curves_epochs": lambda: figs.curves_figure(rs.curves, labels, style, M.EPOCH),
        "consensus": lambda: figs.curves_figure(
            rs.curves, labels, style, M.EMULATED_S, metrics=(M.CONSENSUS_DISTANCE,), log_y=True
        ),
        "claims": lambda: figs.claims_figure(verdicts, {c.id: c for c in spec.claims} if spec else {}),
        "speedup": lambda: (
            figs.speedup_figure(rs.runs, labels, style, baseline, speedup_marks(spec, refs, style), refs)
            if baseline and refs
            else None
        ),
        "time": lambda: figs.time_figure(rs.runs, labels, style),
        "timeline": lambda: figs.timeline_figure({arm: rs.timeline(r) for arm, r in reps.items()}, style),
        "breakdown": lambda: figs.breakdown_figure(rs.runs, labels, style),
        "allocation": lambda: figs.allocation_figure(rs.runs, rs.alloc, labels, style),
        "comm": lambda: figs.comm_figure(rs.runs, labels, style),
    }


FIGURE_FILES = {
    "curves_emulated_time": "curves_emulated_time.png",
    "curves_epochs": "curves_epochs.png",
    "consensus": "consensus_distance.png",
    "claims": "claims.png",
    "speedup": "speedup.png",
    "time": "time_per_arm.png",
    "timeline": "timeline.png",
    "breakdown": "breakdown.png",
    "allocation": "allocation.png",
    "comm": "comm_volume.png",
}


FIGURE_TEXT = {
    "curves_emulated_time": (
        "Quality vs emulated time",
        "Validation accuracy (%) and validation loss (cross-entropy, nats) against emulated seconds: median over "
        "seeds, band = min–max over seeds; each arm has its own colour, line style and marker.",
    ),
    "curves_epochs": ("Quality vs epochs", "Hardware-free view of the same curves, against epochs trained."),
    "consensus": (
        "Consensus distance vs emulated time",
        "(1/n) Σ‖x_i − x̄‖² over the n workers' parameter vectors at every evaluation, against emulated seconds, log "
        "scale (zero, as for synchronous arms, is not drawn); one row per profile when there are many arms. Median "
        "over seeds, band = min–max.",
    ),
    "claims": (
        "Claims: reproduced vs claimed",
        "One panel per claim, its title the verdict and the statistic with its unit (× a ratio, % a share, pts a "
        "difference in percentage points, s emulated seconds). Dots: seeds; marker and bar: statistic and CI; "
        "shaded: acceptance band; dashed: ideal bound.",
    ),
    "speedup": (
        "Speedup vs the baseline",
        "Baseline's emulated time over the arm's (×), per seed (paired by seed); bar = geometric mean; black lines = "
        "claimed values. One row per profile: its arms "
        "over the arm there set up as the baseline (same method and params), named in the row's title; a profile "
        "without one lists its arms without bars (a speedup across profiles would compare two clusters).",
    ),
    "time": ("Emulated time per arm", "Emulated seconds; bar = median over seeds, dots = seeds."),
    "timeline": (
        "Per-worker timeline (first steps)",
        "Compute, communication and idle spans of one run per arm (lowest seed).",
    ),
    "breakdown": (
        "Compute / communication / idle per worker",
        "Emulated seconds each worker spent computing, communicating and idle over the whole run, mean over seeds.",
    ),
    "allocation": (
        "Data allocation per worker",
        "Each worker's share of the data (%) at the last epoch (bars), at the first epoch where it changed "
        "(diamonds), and its share of the summed device speed, which a speed-aware split aims at (black ticks).",
    ),
    "comm": (
        "Communication volume",
        "Megabytes (10⁶ bytes) sent by all workers of an arm (median over seeds, dots = seeds) and by each worker "
        "(mean over seeds).",
    ),
}
