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
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from distrepro.claims.evidence import group_of
from distrepro.claims.model_interval import emulated_quantity
from distrepro.claims.papers import PaperInfo, UnknownPaperError, arms_at_scale, find_paper, known_papers
from distrepro.claims.runs import NoExperimentError, RunSet, load_runs
from distrepro.claims.schema import TRAINING_SCALES, Scale, at_scale
from distrepro.claims.shown import Shown, scale_tallies, show
from distrepro.claims.tally import Tally, mark_dependence, tally
from distrepro.claims.verdicts import Verdict
from distrepro.names import inside
from distrepro.plugins.roots import repo_root
from distrepro.report import figures as figs
from distrepro.report import stage
from distrepro.report.artifact_files import read_locally
from distrepro.report.document import markdown_document
from distrepro.report.figure_set import FIGURE_FILES, arm_labels, figure_makers
from distrepro.report.html import render_html
from distrepro.report.judging import Judgement, judge, mark_post_hoc, preregistration, registered_runs
from distrepro.report.plugin_context import HookContextFactory, method_sections, product_captions
from distrepro.report.scales import latest_runs
from distrepro.safe_write import checked, make_folder, remove, write_text, write_with


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
    #: the verdicts as every output shows them (:mod:`distrepro.claims.shown`), the same the report files print
    shown: Shown | None = None

    def display(self) -> Shown:
        """:attr:`shown`, or built from the verdicts for a report made without one."""
        if self.shown is None:
            self.shown = show(SimpleNamespace(claims=self.claims), self.verdicts)
        return self.shown

    def counts(self) -> dict[str, int]:
        """Verdicts over every claim (``--check`` fails on any FAIL)."""
        out = {"PASS": 0, "FAIL": 0, "INCONCLUSIVE": 0}
        for v in self.verdicts:
            out[v.verdict] += 1
        return out

    def summary(self) -> str:
        """Headline first: the paper's own claims decided by measurement, then what else was judged."""
        return self.display().summary()

    def group(self, verdict: Verdict) -> str:
        """``headline``, ``derived`` or ``structural``: which tally the verdict counts in."""
        return next((group_of(c) for c in self.claims if c.id == verdict.claim_id), "headline")


def write_report(
    info: PaperInfo,
    rs: RunSet,
    out_dir: Path,
    baseline: str | None = None,
    root: Path | None = None,
    sensitivity: Any | None = None,
    scale: Scale | None = None,
    dependence: Any | None = None,
    make_context: HookContextFactory | None = None,
    exploratory: bool = False,
    samples: int | None = None,
) -> Report:
    """Judge the claims and write every report file for ``rs`` under ``out_dir`` (no MLflow writes).

    Every claim is judged at each scale ``rs`` has runs for and at ``scale`` (default: the paper's), and each
    (arm config, seed) counts once (:mod:`distrepro.report.scales`); ``info.spec`` is the paper's as written.
    The figures show the runs of ``scale`` (the paper's own by default), so an arm's bar never mixes scales.
    ``sensitivity``: a :class:`distrepro.sensitivity.sweep.SensitivityResult` to report as its own section;
    else ``dependence`` (:mod:`distrepro.report.dependence_section`) marks the timing verdicts that depend on an
    assumed figure and adds its short section. ``make_context`` makes the context the method folders' hooks get
    (:mod:`distrepro.report.plugin_context`): the harness's, from the caller, since the report never trains.
    At a registered scale it judges only the runs on the record's seeds, ``exploratory`` only the others, and marks
    post hoc what a record cannot certify (:mod:`distrepro.report.judging`; ``samples``: the hardware samples drawn).
    Steps (each named, with its count, for the lines :mod:`distrepro.report.stage` prints): judge, draw, the
    sections, write."""
    fig_dir = _prepared(out_dir)
    stage.enter("judging", f"{len(info.spec.claims) if info.spec else 0} claims")
    judged = judge(info, rs, baseline, scale, root, exploratory)
    swept = sensitivity is not None or dependence is not None
    mark_post_hoc(judged, info, root, samples if swept else None)
    prereg = preregistration(judged)
    drawn = _draw(judged, fig_dir)
    extra = _timing_section(judged, drawn, fig_dir, out_dir, sensitivity, dependence)
    if judged.info.spec is not None:  # once every mark is on the verdicts: what every output prints from here on
        judged.display = show(judged.info.spec, judged.verdicts)
    for part, figures in method_sections(judged.info, fig_dir, out_dir, make_context):
        extra = "\n\n".join(x for x in (extra, part) if x)
        drawn.update(figures)
    stage.enter("writing the report", f"({len(drawn)} figures, {len(PRODUCTS)} files)")
    captions = product_captions(judged.info, fig_dir, out_dir, make_context, root)
    text = markdown_document(judged, drawn, out_dir, root or repo_root(), extra, prereg, captions)
    md_path, html_path = _write_files(judged, text, out_dir)
    spec = judged.info.spec
    return Report(
        info.id,
        out_dir,
        md_path,
        html_path,
        drawn,
        judged.verdicts,
        claims=list(spec.claims) if spec else [],
        shown=judged.display,
        sensitivity=sensitivity,
        dependence=dependence,
    )


def _prepared(out_dir: Path) -> Path:
    """The report folder, made; its products checked (a link planted there and leading elsewhere is refused before
    anything is drawn, written or removed); figures that no longer apply removed. Returns the figures' folder."""
    make_folder(out_dir)
    fig_dir = out_dir / "figures"
    for product in ("figures", *PRODUCTS):
        checked(out_dir, out_dir / product)
    for stale in (p for p in fig_dir.glob("*.png") if p.is_file()):
        remove(out_dir, stale)
    return fig_dir


def _draw(judged: Judgement, fig_dir: Path) -> dict[str, Path]:
    """The harness's figures of the shown scale's runs, saved under ``fig_dir``, each drawn and saved before the
    next (one counted unit of the step); figure key -> file."""
    makers = figure_makers(judged.info, judged.rs, judged.figure_labels(), judged.verdicts, judged.baseline)
    stage.enter("drawing the figures", total=len(makers), unit="figure")
    out: dict[str, Path] = {}
    for key, make in makers.items():
        figure = make()
        if figure is not None:  # a figure the runs do not support (no baseline: no speed-up chart)
            out[key] = figs.save(figure, fig_dir / FIGURE_FILES[key], fig_dir.parent)
        stage.advance()
    return out


def _timing_section(
    judged: Judgement,
    drawn: dict[str, Path],
    fig_dir: Path,
    out_dir: Path,
    sensitivity: Any | None,
    dependence: Any | None,
) -> str:
    """The section on how the timing verdicts depend on assumed hardware figures: the full sweep's
    (``sensitivity``, its figures added to ``drawn`` and its data written) or the cheap check's (``dependence``).
    Either marks, in place, the verdicts that flip over the plausible hardware; so it comes after drawing."""
    verdicts = judged.verdicts
    claims = list(judged.info.spec.claims) if judged.info.spec else []  # merged units are judged as one
    if sensitivity is not None:  # a timing verdict that flips over the plausible hardware depends on an assumption
        from distrepro.report import sensitivity_section as sens

        shares = {c.claim_id: (c.share("PASS"), c.decisive() or "") for c in sensitivity.claims}
        settings = {c.claim_id: [p.verdict for p in c.lhs] for c in sensitivity.claims}
        mark_dependence(verdicts, shares, settings, claims, sensitivity.skipped)
        sens_figs = sens.draw(sensitivity, fig_dir)
        drawn.update({f"sensitivity_{k}": p for k, p in sens_figs.items()})
        extra = sens.sensitivity_section(sensitivity, sens_figs, out_dir, verdicts)
        sens.write_data(sensitivity, out_dir)
        return extra
    if dependence is not None:
        from distrepro.report import dependence_section as dep

        dep.apply(dependence, verdicts, claims)
        return dep.dependence_section(dependence, verdicts, judged.info.id)
    return ""


#: the files :func:`_write_files` writes in the report's folder
PRODUCTS = ("report.md", "report.html", "claims_verdict.json", "runs.csv")


def _write_files(judged: Judgement, text: str, out_dir: Path) -> tuple[Path, Path]:
    """``report.md``, ``report.html``, ``claims_verdict.json`` and ``runs.csv``; the Markdown's and HTML's paths."""
    stage.count("saving the files", len(PRODUCTS), unit="file")
    md_path = write_text(out_dir, out_dir / "report.md", text)
    stage.advance()
    html = render_html(text, out_dir, f"{judged.info.title} — distrepro report")
    html_path = write_text(out_dir, out_dir / "report.html", html)
    stage.advance()
    payload = verdicts_payload(judged)
    write_text(out_dir, out_dir / "claims_verdict.json", json.dumps(payload, indent=2, default=str))
    stage.advance()
    runs = judged.rs.runs
    write_with(out_dir, out_dir / "runs.csv", lambda tmp: runs.to_csv(tmp, index=False))
    stage.advance()
    return md_path, html_path


def verdicts_payload(judged: Judgement) -> dict[str, Any]:
    """``claims_verdict.json``: the verdicts with their group, scale and how they are shown (``shown``, one
    :class:`distrepro.claims.shown.ShownVerdict` each), the tallies (once per unit, overall and per scale decided),
    and where the runs came from (RESULTS.md and the papers index read it)."""
    info, rs, verdicts, scaled, spec = judged.info, judged.rs, judged.verdicts, judged.scaled, judged.info.spec
    if spec is not None and judged.display is None:
        judged.display = show(spec, verdicts)
    shown = judged.display
    by_id = {c.id: c for c in spec.claims} if spec else {}
    return {
        "paper": info.id,
        "title": info.title,
        # an exploratory report (runs on seeds outside the record): never the registered test, never RESULTS.md's
        "exploratory": judged.exploratory,
        "headline": shown.to_dict()["headline"] if shown else None,
        "tally": {k: v for k, v in shown.to_dict().items() if k != "rows"} if shown else None,
        "n_runs": len(rs.runs),
        # per scale, so RESULTS.md gives each scale's row its own count (a report holds every scale's runs)
        "n_runs_by_scale": rs.runs["scale"].value_counts().to_dict() if "scale" in rs.runs.columns else {},
        "generated": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "experiment": rs.experiment,
        "campaigns": rs.campaigns,
        "claims_file": str(info.path) if info.path else None,
        "verdicts": [
            {
                **v.to_dict(),
                "group": group_of(by_id[v.claim_id]),
                "scale": by_id[v.claim_id].scale,
                "shown": shown.of(v.claim_id).to_dict(),
            }
            for v in verdicts
        ]
        if spec and shown
        else [],
        "by_scale": _by_scale(spec, verdicts, scaled) if spec else {},
        "claims": [c.model_dump(mode="json") for c in spec.claims] if spec else [],
    }


def _by_scale(spec: Any, verdicts: list[Verdict], scaled: Any) -> dict[str, dict[str, Any]]:
    """Per scale: the claims judged there (the index's column) and those it decided (``decided``: RESULTS.md's
    rows), each counted as the report counts them (once per unit, apart by what they are about), and whether the
    scale's runs are partial."""
    from distrepro.claims.attribution import about

    decided = scale_tallies(spec, verdicts)
    judged_at = dict(scaled.by_scale) if scaled is not None else {}
    out: dict[str, dict[str, Any]] = {}
    for scale in dict.fromkeys([*judged_at, *decided]):
        judged = list(judged_at.get(scale, {}).values())
        for v in judged:  # a verdict at a scale that did not decide the claim: attributed at that scale
            claim = next((c for c in spec.claims if c.id == v.claim_id), None)
            if claim is not None and not v.about:
                v.about = about(claim.model_copy(update={"scale": scale}), v, spec)
        t = tally(spec.claims, judged, mark=False) if judged else decided.get(scale) or Tally()
        d = decided.get(scale) or Tally()
        out[scale] = {
            "headline_text": t.text(t.of("headline"), "headline") if t.total("headline") else None,
            "apart": t.apart_text(),
            "all_text": t.text(t.all_claims()),
            "headline": dict(t.of("headline")),
            "all": t.all_claims(),
            "partial": bool(scaled.partial(scale)) if scaled is not None else False,
            "decided": {
                "headline_text": d.text(d.of("headline"), "headline") if d.total("headline") else None,
                "apart": d.apart_text(),
                "all_text": d.text(d.all_claims()),
            },
        }
    return out


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
    make_context: HookContextFactory | None = None,
    exploratory: bool = False,
) -> Report:
    """Read ``distrepro/<paper>`` from MLflow, write the report under ``out_dir`` (default
    ``reports/<paper>``) and, unless ``log_to_mlflow`` is false, attach it to the campaign runs.

    ``campaigns`` restricts the report to those campaign runs; by default it reads every run of the paper, so a
    run at one scale or of a subset of arms adds to the report and never erases what other runs decided
    (:mod:`distrepro.report.scales`). The report's files and verdict tags go to ``log_campaigns`` (default: the
    campaigns read, after the newest-run-per-(arm, seed) rule).
    ``scale`` also judges the claims at that scale (beside every scale the runs hold) and picks the figures' runs;
    ``sensitivity`` adds the sweep of the timing verdicts over the plausible hardware
    (:mod:`distrepro.sensitivity`), ``sensitivity_samples`` settings (default: the paper's), its progress on stderr
    as training's (``show_progress``: :func:`distrepro.orchestration.progress.wants_bars`). Without
    ``sensitivity``, ``dependence`` (the default) runs the cheap check of the timing verdicts over the plausible
    hardware (:mod:`distrepro.sensitivity.dependence`, cached in the report folder); ``False`` skips it.
    ``make_context``: the context of the method folders' hooks (:func:`write_report`). ``exploratory``: the report
    of the runs on seeds outside the scale's record, written apart (:func:`exploratory_folder`), never logged to
    MLflow (RESULTS.md reads the reports logged there): the registered report is left as it is."""
    from distrepro.claims.frozen import sensitivity_samples as samples_drawn

    info = find_paper(paper, root)
    judged_info = _at_judged_scale(info, scale, root)  # the spec moved to the scale asked for: what a sweep re-times
    stage.enter("reading the runs", f"of {paper} from the tracking store")
    rs = _read_runs(paper, info, campaigns, tracking_uri, root, log_campaigns)
    judged_rs, _ = registered_runs(info, rs, exploratory)  # what the sweep and the check re-time: the judged runs
    timing = sum(1 for c in judged_info.spec.claims if emulated_quantity(c) is not None) if judged_info.spec else 0
    stage.enter("the hardware check", f"of {timing} timing claims ({len(judged_rs.runs)} runs)")
    sens = _sweep(paper, judged_info, judged_rs, sensitivity_samples, show_progress) if sensitivity else None
    out = Path(out_dir) if out_dir else exploratory_folder(paper) if exploratory else inside("reports", paper)
    checked = None
    if dependence and sens is None and judged_info.spec is not None:
        from distrepro.report.dependence_section import check_dependence

        checked = check_dependence(judged_info, judged_rs, out, sensitivity_samples, stage.StagePhases())
    drawn = samples_drawn(judged_info.spec, sensitivity_samples, sweep=sens is not None)
    report = write_report(info, rs, out, baseline, root, sens, scale, checked, make_context, exploratory, drawn)
    if out_dir is None and not exploratory:  # the shared reports/ folder: its index lists every paper's tally
        from distrepro.report.papers_index import write_index

        write_index(out.parent)
    if log_to_mlflow and not exploratory:
        from distrepro.report.publish import log_report

        report.logged_to = log_report(rs, report, arm_labels(rs.runs, info.spec))
    return report


def exploratory_folder(paper: str) -> Path:
    """Where the exploratory report of ``paper`` goes: ``reports/<paper>/exploratory``, apart from the registered
    report's files (which it never touches)."""
    return inside(inside("reports", paper), "exploratory")


def _at_judged_scale(info: PaperInfo, scale: Scale | None, root: Path | None) -> PaperInfo:
    """``info`` with its spec at the scale judged (``scale``, else the paper's), over the arms that scale has."""
    if info.spec is None:
        return info
    judged = scale or info.spec.setup.scale
    available = arms_at_scale(info, judged, root) if judged in TRAINING_SCALES else None
    return dataclasses.replace(info, spec=at_scale(info.spec, judged, available))


def _read_runs(
    paper: str,
    info: PaperInfo,
    campaigns: list[str] | None,
    tracking_uri: str | None,
    root: Path | None,
    log_campaigns: list[str] | None,
) -> RunSet:
    """The paper's runs from MLflow (with the curves its targets read), each (arm config, seed) once, and the
    campaigns the report goes to. A paper unknown both to the repository and to MLflow is most likely a typo:
    :class:`UnknownPaperError` lists the known ones."""
    claims = info.spec.claims if info.spec else []
    targets = [t.metric for c in claims if (t := getattr(c, "target", None)) is not None]
    try:
        rs = load_runs(paper, campaigns, tracking_uri, extra_curve_keys=targets, progress=stage.StagePhases())
    except NoExperimentError as exc:
        if info.method_dirs or paper == "adhoc":
            raise
        raise UnknownPaperError(paper, known_papers(root)) from exc
    read_locally(rs)  # configs, timelines, READMEs read where they lie in the store's folders, not downloaded
    kept = latest_runs(rs.runs)  # every scale's runs, each (arm config, seed) once (distrepro.report.scales)
    parents = sorted({p for p in kept["parent_run_id"].dropna()})
    return dataclasses.replace(rs, runs=kept, campaigns=list(log_campaigns or campaigns or parents))


def _sweep(paper: str, judged_info: PaperInfo, rs: RunSet, samples: int | None, show_progress: bool | None) -> Any:
    """The sensitivity sweep of the timing verdicts (minutes: its progress on stderr, as training's)."""
    from distrepro.orchestration.progress import PhaseProgress, progress_bars, wants_bars
    from distrepro.sensitivity.runner import sensitivity as sweep

    with progress_bars(wants_bars(show_progress)) as bars:
        return sweep(judged_info, rs, samples, progress=PhaseProgress(f"sensitivity · {paper}", bars))
