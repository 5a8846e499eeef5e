"""``distrepro report <paper>``: verdicts, figures, Markdown and HTML, rebuilt from MLflow alone.

The report is regenerated from the tracked runs without re-running anything (as benchopt's
``--collect``): :func:`build_report` reads the runs (:func:`distrepro.claims.runs.load_runs`), judges
the paper's claims (:mod:`distrepro.claims.verdicts`), writes ``report.md``, a self-contained
``report.html``, ``figures/*.png``, ``claims_verdict.json`` and ``runs.csv`` under
``reports/<paper>/``, and logs the same files under ``report/`` on every campaign (parent) run the
runs came from, so the MLflow UI shows each campaign's report next to its runs.

A paper without claims (a baseline, or the ad-hoc experiment ``distrepro/adhoc``) still gets the
runs table, curves, timelines and environment.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

import distrepro
from distrepro import metrics as M
from distrepro.claims.evidence import group_of, tally
from distrepro.claims.papers import PaperInfo, UnknownPaperError, arms_at_scale, find_paper, known_papers
from distrepro.claims.runs import NoExperimentError, ReportError, RunSet, load_runs
from distrepro.claims.schema import TRAINING_SCALES, PaperSpec, Scale, at_scale
from distrepro.claims.verdicts import Verdict, evaluate_claims, select_arm
from distrepro.names import inside
from distrepro.plugins.roots import repo_root
from distrepro.report import figures as figs
from distrepro.report import sections as sec
from distrepro.report.headline import first_screen, provenance
from distrepro.report.html import render_html
from distrepro.report.speedup_references import speedup_marks, speedup_references
from distrepro.tracking.runlog import flatten_params

_log = logging.getLogger(__name__)


@dataclass
class Report:
    paper: str
    out_dir: Path
    markdown: Path
    html: Path
    figures: dict[str, Path]
    verdicts: list[Verdict]
    logged_to: list[str] = field(default_factory=list)
    sensitivity: Any | None = None  # SensitivityResult when asked for (--sensitivity)

    claims: list[Any] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """Verdicts over every claim (``--check`` fails on any FAIL)."""
        out = {"PASS": 0, "FAIL": 0, "INCONCLUSIVE": 0}
        for v in self.verdicts:
            out[v.verdict] += 1
        return out

    def summary(self) -> str:
        """Headline first: the paper's own claims decided by measurement, then what else was judged."""
        return tally(self.claims, self.verdicts).summary()

    def group(self, verdict: Verdict) -> str:
        """``headline``, ``derived`` or ``structural``: which tally the verdict counts in."""
        return next((group_of(c) for c in self.claims if c.id == verdict.claim_id), "headline")


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


def _representatives(runs: pd.DataFrame, labels: dict[str, str]) -> dict[str, str]:
    """One finished run per arm (lowest seed) for the timeline and README."""
    done = runs[runs["status"] == "FINISHED"].sort_values(["seed", "start_time"])
    out: dict[str, str] = {}
    for run_id in done["run_id"]:
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
    spec = info.spec
    style = style or report_style(rs.runs, labels, spec)
    reps = _representatives(rs.runs, labels)
    refs = speedup_references(spec, baseline, style)
    drawn = {
        "curves_emulated_time": figs.curves_figure(rs.curves, labels, style, M.EMULATED_S),
        "curves_epochs": figs.curves_figure(rs.curves, labels, style, M.EPOCH),
        "consensus": figs.curves_figure(
            rs.curves, labels, style, M.EMULATED_S, metrics=(M.CONSENSUS_DISTANCE,), log_y=True
        ),
        "claims": figs.claims_figure(verdicts, {c.id: c for c in spec.claims} if spec else {}),
        "speedup": figs.speedup_figure(rs.runs, labels, style, baseline, speedup_marks(spec, refs, style), refs)
        if baseline and refs
        else None,
        "time": figs.time_figure(rs.runs, labels, style),
        "timeline": figs.timeline_figure({arm: rs.timeline(r) for arm, r in reps.items()}, style),
        "breakdown": figs.breakdown_figure(rs.runs, labels, style),
        "allocation": figs.allocation_figure(rs.runs, rs.alloc, labels, style),
        "comm": figs.comm_figure(rs.runs, labels, style),
    }
    return {k: v for k, v in drawn.items() if v is not None}


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


_FIGURE_TEXT = {
    "curves_emulated_time": ("Quality vs emulated time", "Median over seeds, band = min–max over seeds."),
    "curves_epochs": ("Quality vs epochs", "Hardware-free view of the same curves."),
    "consensus": (
        "Consensus distance vs emulated time",
        "(1/n) Σ‖x_i − x̄‖² at every evaluation, log scale (zero, as for synchronous arms, is not drawn); one row per "
        "profile when there are many arms. Median over seeds, band = min–max.",
    ),
    "claims": (
        "Claims: reproduced vs claimed",
        "Dots: seeds; marker and bar: statistic and CI; shaded: acceptance band; dashed: ideal bound.",
    ),
    "speedup": (
        "Speedup vs the baseline",
        "Per seed (paired by seed); bar = geometric mean; black lines = claimed values. One row per profile: its arms "
        "over the arm there set up as the baseline (same method and params), named in the row's title; a profile "
        "without one lists its arms without bars (a speedup across profiles would compare two clusters).",
    ),
    "time": ("Emulated time per arm", "Bar = median over seeds, dots = seeds."),
    "timeline": (
        "Per-worker timeline (first steps)",
        "Compute, communication and idle spans of one run per arm (lowest seed).",
    ),
    "breakdown": ("Compute / communication / idle per worker", "Emulated seconds over the whole run, mean over seeds."),
    "allocation": (
        "Data allocation per worker",
        "`alloc/<r>/share` at the last epoch (bars), at the first epoch where it changed (diamonds), and the "
        "share of the summed device speed a speed-aware split aims at (black ticks).",
    ),
    "comm": ("Communication volume", "`comm/bytes_total` per arm and `worker/<r>/bytes_sent` per worker."),
}


def _markdown(
    info: PaperInfo,
    rs: RunSet,
    labels: dict[str, str],
    verdicts: list[Verdict],
    drawn: dict[str, Path],
    out: Path,
    root: Path,
    extra: str = "",
) -> str:
    spec = info.spec
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    n_done = int((rs.runs["status"] == "FINISHED").sum())
    parts = [f"# {info.title} — reproduction report", ""]
    screen = first_screen(spec, verdicts)  # the answer first (distrepro.report.headline)
    if screen:
        parts += [screen]
    parts += [provenance(info, rs, n_done, now, distrepro.__version__)]
    if spec is not None:
        c = spec.citation
        cite = ", ".join(x for x in (c.authors, f"*{c.title}*", c.venue) if x)
        parts += ["", f"> {cite}" + (f". <{c.url}>" if c.url else "")]
    parts += ["", "## Claims", ""]
    if spec is None or not spec.claims:
        parts.append("_No claims are encoded for this paper yet; the report shows the runs found._")
    else:
        parts += [sec.tally_text(spec, verdicts), "", sec.grouped_claims_tables(spec, verdicts)]
        conflicts = sec.conflicts_section(spec)
        if conflicts:
            parts += ["### Claims that cannot all hold", "", conflicts]
        parts += ["### Claim details", "", sec.claim_details(spec, verdicts)]
    if extra:  # e.g. the sensitivity of the timing verdicts (distrepro/report/sensitivity_section.py)
        parts += [extra]
    parts += ["## Runs", "", sec.runs_table(rs.runs, labels)]
    bounds = sec.time_bounds_table(rs.runs, labels)
    if bounds:
        parts += [
            "### Time against compute bounds",
            "",
            "*Balanced*: samples / sum of the devices' declared speeds, the compute time of a perfect split with no "
            "communication. *Slowest device's compute*: what lockstep training waits for at every step (the straggler "
            "bound). The rest of an arm's time is communication and waiting. Medians over seeds; all emulated.",
            "",
            bounds,
        ]
    bad = rs.runs[rs.runs["status"] != "FINISHED"]
    if len(bad):
        parts.append(
            "Not finished (ignored by every verdict): "
            + ", ".join(
                f"{labels[r]} seed {s} `{st}` ({r})" for r, s, st in zip(bad.run_id, bad.seed, bad.status, strict=True)
            )
            + "\n"
        )
    parts += ["## Figures", ""]
    for key, path in drawn.items():
        if key not in _FIGURE_TEXT:  # a section's own figure, shown in that section
            continue
        title, caption = _FIGURE_TEXT[key]
        parts += [f"### {title}", "", f"![{title}]({path.relative_to(out).as_posix()})", "", f"_{caption}_", ""]
    parts += ["## Environment", "", sec.environment(rs.runs, labels)]
    parts += ["## Known deviations", ""]
    reps = _representatives(rs.runs, labels)
    for method in sorted(rs.runs["method"].unique()):
        run_id = next((r for r in reps.values() if rs.runs.set_index("run_id").at[r, "method"] == method), None)
        text, origin = sec.readme_for(
            method, rs.artifact_text(run_id, "method_README.md") if run_id else None, info.method_dirs, root
        )
        parts += [f"### {method}", ""]
        parts += [f"_README {origin}._", "", sec.deviations(text)] if text else ["_No README found._", ""]
    return "\n".join(parts).rstrip() + "\n"


def method_sections(info: PaperInfo, fig_dir: Path, out_dir: Path) -> list[tuple[str, dict[str, Path]]]:
    """Sections a paper's method folders add (``report.py`` with ``section(ctx)`` returning markdown and its saved
    figures; ``ctx`` a :class:`distrepro.api.ReportContext`): what only the paper needs, e.g. QSR's period
    schedules from its plans.
    A section that fails is reported in its place rather than losing the whole report."""
    out = []
    for folder in info.method_dirs:
        if not (folder / "report.py").is_file():
            continue
        try:
            from distrepro.plugins.registry import plugin_module
            from distrepro.report.plugin_context import plugin_context

            scale = info.spec.setup.scale if info.spec else "proxy"
            ctx = plugin_context(out_dir, scale, info, fig_dir)
            out.append(plugin_module(folder.name, "report").section(ctx))
        except Exception as exc:  # the claims and runs are still worth a report
            _log.warning("report section of %s failed: %s", folder.name, exc)
            out.append((f"_The report section of `{folder.name}` failed: {exc}_\n", {}))
    return out


def write_report(
    info: PaperInfo,
    rs: RunSet,
    out_dir: Path,
    baseline: str | None = None,
    root: Path | None = None,
    sensitivity: Any | None = None,
) -> Report:
    """Judge the claims and write every report file for ``rs`` under ``out_dir`` (no MLflow writes).

    ``sensitivity``: a :class:`distrepro.sensitivity.sweep.SensitivityResult` to report as its own section."""
    out_dir.mkdir(parents=True, exist_ok=True)
    fig_dir = out_dir / "figures"
    for stale in fig_dir.glob("*.png"):  # a figure that no longer applies must not linger
        stale.unlink()
    spec = info.spec
    labels = arm_labels(rs.runs, spec)
    if baseline is not None and baseline not in set(labels.values()):
        known = ", ".join(report_style(rs.runs, labels, spec).order)
        raise ReportError(f"unknown baseline arm {baseline!r} for --baseline; known arms: {known}")
    verdicts = evaluate_claims(spec, rs.runs, rs.curves, info.id) if spec else []
    baseline = baseline or (spec.setup.baseline if spec else None)
    drawn = {
        k: figs.save(f, inside(fig_dir, FIGURE_FILES[k]))
        for k, f in draw_figures(info, rs, labels, verdicts, baseline).items()
    }
    extra = ""
    if sensitivity is not None:
        from distrepro.report import sensitivity_section as sens

        sens_figs = sens.draw(sensitivity, fig_dir)
        drawn.update({f"sensitivity_{k}": p for k, p in sens_figs.items()})
        extra = sens.sensitivity_section(sensitivity, sens_figs, out_dir, verdicts)
        sens.write_data(sensitivity, out_dir)
    for part, figures in method_sections(info, fig_dir, out_dir):
        extra = "\n\n".join(x for x in (extra, part) if x)
        drawn.update(figures)
    text = _markdown(info, rs, labels, verdicts, drawn, out_dir, root or repo_root(), extra)
    md_path, html_path = inside(out_dir, "report.md"), inside(out_dir, "report.html")
    md_path.write_text(text, encoding="utf-8")
    html_path.write_text(render_html(text, out_dir, f"{info.title} — distrepro report"), encoding="utf-8")
    t = tally(spec.claims, verdicts) if spec else None
    by_id = {c.id: c for c in spec.claims} if spec else {}
    payload: dict[str, Any] = {
        "paper": info.id,
        "title": info.title,
        "headline": t.text(t.of("headline")) if t and t.total("headline") else None,
        "n_runs": len(rs.runs),
        "generated": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "experiment": rs.experiment,
        "campaigns": rs.campaigns,
        "claims_file": str(info.path) if info.path else None,
        "verdicts": [{**v.to_dict(), "group": group_of(by_id[v.claim_id])} for v in verdicts] if spec else [],
        "claims": [c.model_dump(mode="json") for c in spec.claims] if spec else [],
    }
    inside(out_dir, "claims_verdict.json").write_text(json.dumps(payload, indent=2, default=str), encoding="utf-8")
    rs.runs.to_csv(inside(out_dir, "runs.csv"), index=False)
    return Report(
        info.id,
        out_dir,
        md_path,
        html_path,
        drawn,
        verdicts,
        claims=list(spec.claims) if spec else [],
        sensitivity=sensitivity,
    )


def build_report(
    paper: str,
    out_dir: str | Path | None = None,
    campaigns: list[str] | None = None,
    tracking_uri: str | None = None,
    root: Path | None = None,
    baseline: str | None = None,
    log_to_mlflow: bool = True,
    scale: Scale | None = None,
    sensitivity: bool = False,
    sensitivity_samples: int | None = None,
    show_progress: bool | None = None,
) -> Report:
    """Read ``distrepro/<paper>`` from MLflow, write the report under ``out_dir`` (default
    ``reports/<paper>``) and, unless ``log_to_mlflow`` is false, attach it to the campaign runs.

    ``scale`` judges the claims on the runs of that scale (default: the paper's ``setup.scale``);
    ``sensitivity`` adds the sweep of the timing verdicts over the plausible hardware
    (:mod:`distrepro.sensitivity`), ``sensitivity_samples`` settings (default: the paper's). The sweep takes
    minutes, so its progress goes to stderr as a campaign's training does
    (:func:`distrepro.orchestration.progress.wants_bars`:
    ``show_progress`` ``None``, a live bar when stderr is a terminal; ``False`` (``--no-progress``), a line
    per phase and quarter of it)."""
    info = find_paper(paper, root)
    if info.spec is not None:
        judged = scale or info.spec.setup.scale
        available = arms_at_scale(info, judged, root) if judged in TRAINING_SCALES else None
        info = dataclasses.replace(info, spec=at_scale(info.spec, judged, available))
    claims = info.spec.claims if info.spec else []
    targets = [t.metric for c in claims if (t := getattr(c, "target", None)) is not None]
    try:
        rs = load_runs(paper, campaigns, tracking_uri, extra_curve_keys=targets)
    except NoExperimentError as exc:  # a paper unknown both to the repo and to MLflow: most likely a typo
        if info.method_dirs or paper == "adhoc":
            raise
        raise UnknownPaperError(paper, known_papers(root)) from exc
    sens = None
    if sensitivity:
        from distrepro.orchestration.progress import PhaseProgress, progress_bars, wants_bars
        from distrepro.sensitivity.runner import sensitivity as sweep

        with progress_bars(wants_bars(show_progress)) as bars:
            sens = sweep(info, rs, sensitivity_samples, progress=PhaseProgress(f"sensitivity · {paper}", bars))
    out = Path(out_dir) if out_dir else inside("reports", paper)
    report = write_report(info, rs, out, baseline, root, sens)
    if out_dir is None:  # the shared reports/ folder: its index lists every paper's tally
        from distrepro.report.papers_index import write_index

        write_index(out.parent)
    if log_to_mlflow:
        from distrepro.report.publish import log_report

        report.logged_to = log_report(rs, report, arm_labels(rs.runs, info.spec))
    return report
