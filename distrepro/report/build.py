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

import distrepro
from distrepro.claims.evidence import group_of
from distrepro.claims.papers import PaperInfo, UnknownPaperError, arms_at_scale, find_paper, known_papers
from distrepro.claims.runs import NoExperimentError, ReportError, RunSet, load_runs
from distrepro.claims.schema import TRAINING_SCALES, Scale, at_scale
from distrepro.claims.tally import mark_dependence, tally
from distrepro.claims.verdicts import Verdict
from distrepro.names import inside
from distrepro.plugins.roots import repo_root
from distrepro.report import claims_sections as claims_sec
from distrepro.report import figures as figs
from distrepro.report import sections as sec
from distrepro.report.deciding_runs import deciding_runs
from distrepro.report.figure_set import (
    FIGURE_FILES,
    FIGURE_TEXT,
    arm_labels,
    draw_figures,
    report_style,
    representatives,
)
from distrepro.report.headline import first_screen, provenance
from distrepro.report.html import contents, render_html
from distrepro.report.scales import (
    ScaledVerdicts,
    judge_across_scales,
    latest_runs,
    run_scales,
    scale_table,
    tallies_by_scale,
)

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
    dependence: Any | None = None  # the default check of the timing verdicts (distrepro.sensitivity.dependence)

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


def _markdown(
    info: PaperInfo,
    rs: RunSet,
    labels: dict[str, str],
    verdicts: list[Verdict],
    drawn: dict[str, Path],
    out: Path,
    root: Path,
    extra: str = "",
    prereg: str = "",
    scaled: ScaledVerdicts | None = None,
) -> str:
    spec = info.spec
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    n_done = int((rs.runs["status"] == "FINISHED").sum())
    # the contents under the title: after the answer and the caveats it fell below a laptop's first screen
    parts = [f"# {info.title} — reproduction report", "", _CONTENTS, ""]  # filled in once every section is known
    screen = first_screen(spec, verdicts)  # the answer first (distrepro.report.headline)
    if screen:
        parts += [screen]
    deciding = deciding_runs(info, verdicts, root)  # headline claims only a larger scale decides: the command, cost
    if deciding:
        parts += [deciding]
    parts += [sec.caveats(rs.runs), "", provenance(info, rs, n_done, now, distrepro.__version__)]
    if prereg:  # which verdicts a test fixed in advance decided, and every choice made after seeing them
        parts += ["", prereg]
    if spec is not None:
        c = spec.citation
        cite = ", ".join(x for x in (c.authors, f"*{c.title}*", c.venue) if x)
        parts += ["", f"> {cite}" + (f". <{c.url}>" if c.url else "")]
    parts += ["", "## Claims", ""]
    if spec is None or not spec.claims:
        parts.append("_No claims are encoded for this paper yet; the report shows the runs found._")
    else:
        parts += [claims_sec.tally_text(spec, verdicts), "", claims_sec.grouped_claims_tables(spec, verdicts)]
        by_scale = scale_table(scaled, {c.id: group_of(c) for c in spec.claims}) if scaled else ""
        if by_scale:
            several = len(scaled.by_scale) > 1 if scaled else False
            parts += [
                "### Verdicts by scale" if several else "### Partial runs",
                "",
                "Each claim judged at every scale the store has runs for; a row above shows the largest scale that "
                "decided it (PASS or FAIL), else the paper's own scale. Each (arm config, seed) counts once: its "
                "newest finished run."
                if several
                else "Some arms the claims read have no runs here (their claims say *arm missing*):",
                "",
                by_scale,
            ]
        conflicts = claims_sec.conflicts_section(spec)
        if conflicts:
            parts += ["### Claims that cannot all hold", "", conflicts]
        parts += ["### Claim details", "", claims_sec.claim_details(spec, verdicts)]
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
        if key not in FIGURE_TEXT:  # a section's own figure, shown in that section
            continue
        title, caption = FIGURE_TEXT[key]
        parts += [f"### {title}", "", f"![{title}]({path.relative_to(out).as_posix()})", "", f"_{caption}_", ""]
    products = sorted(out.glob("*.png"))  # what the paper's products hook wrote beside the report (Fig. 6's grid)
    if products:
        parts += ["## Products beyond the arms", ""]
        for path in products:
            data = path.with_suffix(".csv")
            where = f"; its numbers: `{data.name}`" if data.is_file() else ""
            parts += [f"![{path.stem}]({path.name})", "", f"_{_product_caption(path.stem)}{where}._", ""]
    parts += ["## Environment", "", sec.environment(rs.runs, labels)]
    parts += ["## Known deviations", ""]
    reps = representatives(rs.runs, labels)
    for method in sorted(rs.runs["method"].unique()):
        run_id = next((r for r in reps.values() if rs.runs.set_index("run_id").at[r, "method"] == method), None)
        text, origin = sec.readme_for(
            method, rs.artifact_text(run_id, "method_README.md") if run_id else None, info.method_dirs, root
        )
        parts += [f"### {method}", ""]
        parts += [f"_README {origin}._", "", sec.deviations(text)] if text else ["_No README found._", ""]
    text = "\n".join(parts).rstrip() + "\n"
    return text.replace(_CONTENTS, contents(text), 1)


#: where the table of contents goes on the first screen (replaced once the report's sections are known)
_CONTENTS = "<!-- contents -->"


def _product_caption(stem: str) -> str:
    if stem == "fig6":
        return (
            "Decent-DP Fig. 6 as the emulator predicts it: emulated milliseconds per iteration (Transformer-base, "
            "25K tokens per iteration) by GPU count, per method, on three emulated clusters"
        )
    return f"`{stem}.png`, written by the paper's products hook (`products.py` in its method folder)"


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


def _preregistration(info: PaperInfo, rs: RunSet, scale: str) -> str:
    """The scale's frozen record stamped into the report (:mod:`distrepro.report.preregistration_section`): which
    verdicts a record fixed in advance decided, which seeds it named, and every choice made after seeing them."""
    from distrepro.report.preregistration_section import preregistration_section

    assert info.spec is not None
    runs = rs.runs
    has_seeds = len(runs) and {"seed", "status"} <= set(runs.columns)
    at = run_scales(runs, info.spec.setup.scale) == scale if has_seeds else None
    done = runs.loc[(runs["status"] == "FINISHED") & at, "seed"].dropna() if has_seeds else []
    return preregistration_section(info.spec, info.path, scale, [int(x) for x in done])


def write_report(
    info: PaperInfo,
    rs: RunSet,
    out_dir: Path,
    baseline: str | None = None,
    root: Path | None = None,
    sensitivity: Any | None = None,
    scale: Scale | None = None,
    dependence: Any | None = None,
) -> Report:
    """Judge the claims and write every report file for ``rs`` under ``out_dir`` (no MLflow writes).

    Every claim is judged at each scale ``rs`` has runs for and at ``scale`` (default: the paper's), and each
    (arm config, seed) counts once (:mod:`distrepro.report.scales`); ``info.spec`` is the paper's as written.
    The figures show the runs of ``scale`` (the paper's own by default), so an arm's bar never mixes scales.
    ``sensitivity``: a :class:`distrepro.sensitivity.sweep.SensitivityResult` to report as its own section;
    else ``dependence`` (:mod:`distrepro.report.dependence_section`) marks the timing verdicts that depend on an
    assumed figure and adds its short section."""
    out_dir.mkdir(parents=True, exist_ok=True)
    fig_dir = out_dir / "figures"
    for stale in fig_dir.glob("*.png"):  # a figure that no longer applies must not linger
        stale.unlink()
    rs = dataclasses.replace(rs, runs=latest_runs(rs.runs))
    scaled = judge_across_scales(info, rs.runs, rs.curves, scale, root) if info.spec else None
    if scaled is not None:
        info = dataclasses.replace(info, spec=scaled.spec)
    spec = info.spec
    labels = arm_labels(rs.runs, spec)
    if baseline is not None and baseline not in set(labels.values()):
        known = ", ".join(report_style(rs.runs, labels, spec).order)
        raise ReportError(f"unknown baseline arm {baseline!r} for --baseline; known arms: {known}")
    verdicts = scaled.verdicts if scaled else []
    baseline = baseline or (spec.setup.baseline if spec else None)
    shown = scale or (spec.setup.scale if spec else "proxy")
    prereg = _preregistration(info, rs, shown) if spec is not None else ""
    at_shown = run_scales(rs.runs, shown) == shown
    fig_labels = {r: lab for r, lab in labels.items() if r in set(rs.runs.loc[at_shown, "run_id"])} or labels
    drawn = {
        k: figs.save(f, inside(fig_dir, FIGURE_FILES[k]))
        for k, f in draw_figures(info, rs, fig_labels, verdicts, baseline).items()
    }
    extra = ""
    if sensitivity is not None:  # a timing verdict that flips over the plausible hardware depends on an assumption
        from distrepro.report import sensitivity_section as sens

        mark_dependence(verdicts, {c.claim_id: (c.share("PASS"), c.decisive() or "") for c in sensitivity.claims})

        sens_figs = sens.draw(sensitivity, fig_dir)
        drawn.update({f"sensitivity_{k}": p for k, p in sens_figs.items()})
        extra = sens.sensitivity_section(sensitivity, sens_figs, out_dir, verdicts)
        sens.write_data(sensitivity, out_dir)
    elif dependence is not None:
        from distrepro.report import dependence_section as dep

        dep.apply(dependence, verdicts)
        extra = dep.dependence_section(dependence, verdicts, info.id)
    for part, figures in method_sections(info, fig_dir, out_dir):
        extra = "\n\n".join(x for x in (extra, part) if x)
        drawn.update(figures)
    text = _markdown(info, rs, labels, verdicts, drawn, out_dir, root or repo_root(), extra, prereg, scaled)
    md_path, html_path = inside(out_dir, "report.md"), inside(out_dir, "report.html")
    md_path.write_text(text, encoding="utf-8")
    html_path.write_text(render_html(text, out_dir, f"{info.title} — distrepro report"), encoding="utf-8")
    t = tally(spec.claims, verdicts) if spec else None
    by_id = {c.id: c for c in spec.claims} if spec else {}
    payload: dict[str, Any] = {
        "paper": info.id,
        "title": info.title,
        "headline": t.text(t.of("headline"), "headline") if t and t.total("headline") else None,
        "n_runs": len(rs.runs),
        # per scale, so RESULTS.md gives each scale's row its own count (a report holds every scale's runs)
        "n_runs_by_scale": rs.runs["scale"].value_counts().to_dict() if "scale" in rs.runs.columns else {},
        "generated": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "experiment": rs.experiment,
        "campaigns": rs.campaigns,
        "claims_file": str(info.path) if info.path else None,
        "verdicts": [
            {**v.to_dict(), "group": group_of(by_id[v.claim_id]), "scale": by_id[v.claim_id].scale} for v in verdicts
        ]
        if spec
        else [],
        "by_scale": tallies_by_scale(scaled, {c.id: group_of(c) for c in spec.claims}) if scaled and spec else {},
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
        dependence=dependence,
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
    log_campaigns: list[str] | None = None,
    dependence: bool = True,
) -> Report:
    """Read ``distrepro/<paper>`` from MLflow, write the report under ``out_dir`` (default
    ``reports/<paper>``) and, unless ``log_to_mlflow`` is false, attach it to the campaign runs.

    ``campaigns`` restricts the report to those campaign runs; by default it reads every run of the paper, so a
    run at one scale or of a subset of arms adds to the report and never erases what other runs decided
    (:mod:`distrepro.report.scales`). The report's files and verdict tags go to ``log_campaigns`` (default: the
    campaigns read, after the newest-run-per-(arm, seed) rule).
    ``scale`` also judges the claims at that scale (beside every scale the runs hold) and picks the figures' runs;
    ``sensitivity`` adds the sweep of the timing verdicts over the plausible hardware
    (:mod:`distrepro.sensitivity`), ``sensitivity_samples`` settings (default: the paper's). The sweep takes
    minutes, so its progress goes to stderr as a campaign's training does
    (:func:`distrepro.orchestration.progress.wants_bars`:
    ``show_progress`` ``None``, a live bar when stderr is a terminal; ``False`` (``--no-progress``), a line
    per phase and quarter of it). Without ``sensitivity``, ``dependence`` (the default) runs the cheap check of
    the timing verdicts over the plausible hardware (:mod:`distrepro.sensitivity.dependence`, cached in the
    report folder) that marks those that depend on an assumption; ``False`` (``--no-sensitivity``) skips it."""
    info = find_paper(paper, root)
    judged_info = info  # the spec moved to the scale asked for: what the sensitivity sweep re-times
    if info.spec is not None:
        judged = scale or info.spec.setup.scale
        available = arms_at_scale(info, judged, root) if judged in TRAINING_SCALES else None
        judged_info = dataclasses.replace(info, spec=at_scale(info.spec, judged, available))
    claims = info.spec.claims if info.spec else []
    targets = [t.metric for c in claims if (t := getattr(c, "target", None)) is not None]
    try:
        rs = load_runs(paper, campaigns, tracking_uri, extra_curve_keys=targets)
    except NoExperimentError as exc:  # a paper unknown both to the repo and to MLflow: most likely a typo
        if info.method_dirs or paper == "adhoc":
            raise
        raise UnknownPaperError(paper, known_papers(root)) from exc
    kept = latest_runs(rs.runs)  # every scale's runs, each (arm config, seed) once (distrepro.report.scales)
    parents = sorted({p for p in kept["parent_run_id"].dropna()})
    rs = dataclasses.replace(rs, runs=kept, campaigns=list(log_campaigns or campaigns or parents))
    sens = None
    if sensitivity:
        from distrepro.orchestration.progress import PhaseProgress, progress_bars, wants_bars
        from distrepro.sensitivity.runner import sensitivity as sweep

        with progress_bars(wants_bars(show_progress)) as bars:
            sens = sweep(judged_info, rs, sensitivity_samples, progress=PhaseProgress(f"sensitivity · {paper}", bars))
    out = Path(out_dir) if out_dir else inside("reports", paper)
    checked = None
    if dependence and sens is None and judged_info.spec is not None:
        from distrepro.report.dependence_section import check_dependence

        checked = check_dependence(judged_info, rs, out, sensitivity_samples)
    report = write_report(info, rs, out, baseline, root, sens, scale, checked)
    if out_dir is None:  # the shared reports/ folder: its index lists every paper's tally
        from distrepro.report.papers_index import write_index

        write_index(out.parent)
    if log_to_mlflow:
        from distrepro.report.publish import log_report

        report.logged_to = log_report(rs, report, arm_labels(rs.runs, info.spec))
    return report
