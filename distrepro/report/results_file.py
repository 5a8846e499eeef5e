"""``RESULTS.md``: the current verdicts of every paper, per scale, read from the tracked runs by one command.

A reader wants one committed page that says how each paper fared, claim by claim, with the run it comes from;
``reports/`` is generated and ignored, and BENCHMARKS.md documents how the numbers were made rather than stating
them. ``distrepro results`` writes that page from the MLflow store: for each paper and scale, the newest finished
``reproduce <paper> (<scale>)`` run that holds a report (its ``report/claims_verdict.json`` artifact), with the
headline tally, every claim's verdict and statistic, the run time, the commit and the date. Nothing is judged
again here: the verdicts are the report's.

Each paper's section records the digest of its inputs (:mod:`distrepro.report.results_inputs`) and, in a
``frozen-inputs`` mark, one digest per input a pre-registration freezes (paper.yaml with ``setup:``, arm configs,
hardware profiles with their ranges, the emulator's error band, the emulator and claims code);
:func:`distrepro.report.results_check.check_results` compares them with the checkout, so ``results --check`` and a
test fail when any of them changed after the file was written, one line per paper and input. A run whose own inputs
differ from the checkout's is marked in its row rather than passing for current. A post-hoc verdict (one some choice
of which was made after its pre-registration) is marked in its row and left out of the tallies.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distrepro.claims.papers import find_paper, known_papers
from distrepro.claims.sequential import level_text
from distrepro.orchestration.heartbeat import Steps
from distrepro.report.results_check import REGENERATE, input_marks
from distrepro.report.results_inputs import INPUTS_TAG, SCALES, configs_digest, inputs_digest
from distrepro.report.sections import table
from distrepro.safe_write import write_text

RESULTS_FILE = "RESULTS.md"


@dataclass(frozen=True)
class ScaleResult:
    """The newest reported reproduction of one paper at one scale."""

    scale: str
    run_id: str
    commit: str
    dirty: bool
    inputs: str  # the digest the run was made on ("" for runs older than the tag)
    started_ms: int
    ended_ms: int
    verdict_file: dict[str, Any]


def _utc(ms: int) -> str:
    return _dt.datetime.fromtimestamp(ms / 1000, _dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _duration(ms: int) -> str:
    s = round(ms / 1000)
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"


def _verdict_file(client: Any, run_id: str) -> dict[str, Any] | None:
    """The report's ``claims_verdict.json`` logged on ``run_id``, or None when the run holds no report."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            path = client.download_artifacts(run_id, "report/claims_verdict.json", tmp)
        except Exception:  # no report logged (--no-report, or the run failed before it)
            return None
        data: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
        return data


def latest_results(client: Any, paper: str) -> dict[str, ScaleResult]:
    """Scale → the newest FINISHED ``reproduce`` run of ``paper`` at that scale that holds a report."""
    from distrepro.tracking.mlflow_client import experiment_name

    experiment = client.get_experiment_by_name(experiment_name(paper))
    if experiment is None:
        return {}
    runs = client.search_runs(
        [experiment.experiment_id],
        filter_string="tags.`distrepro.reproduce` LIKE '%' and attributes.status = 'FINISHED'",
        order_by=["attributes.start_time DESC"],
    )
    out: dict[str, ScaleResult] = {}
    for run in runs:
        tags = run.data.tags
        scale = tags.get("distrepro.reproduce", "")
        if scale in out or (data := _verdict_file(client, run.info.run_id)) is None:
            continue
        out[scale] = ScaleResult(
            scale=scale,
            run_id=run.info.run_id,
            commit=tags.get("git.commit", "unknown"),
            dirty=tags.get("git.dirty") == "true",
            inputs=tags.get(INPUTS_TAG, ""),
            started_ms=int(run.info.start_time or 0),
            ended_ms=int(run.info.end_time or run.info.start_time or 0),
            verdict_file=data,
        )
    return out


def scale_verdicts(result: ScaleResult, scale: str | None = None) -> list[dict[str, Any]]:
    """The verdicts decided at ``result``'s scale. A report holds every scale since one report serves a paper
    (each claim judged at the scale that decides it, its ``scale`` field): logged on each scale's reproduction,
    the same file would otherwise show every claim under every scale. Older, single-scale files are all one scale."""
    verdicts: list[dict[str, Any]] = result.verdict_file.get("verdicts", [])
    if not result.verdict_file.get("by_scale"):
        return verdicts
    return [v for v in verdicts if v.get("scale", result.scale) == (scale or result.scale)]


def _headline(
    paper: str, result: ScaleResult, verdicts: list[dict[str, Any]], root: Path | None = None, scale: str | None = None
) -> str:
    """The headline tally of the claims decided at this scale, counted as the report counts them (one per unit,
    FAIL split, "depends on an assumption" apart), with the current claims file's groups and units."""
    if not result.verdict_file.get("by_scale"):
        return str(result.verdict_file.get("headline") or "– (none judged)")
    counted = _shown_scale(result, scale or result.scale)
    if counted is not None:  # the report's own count (distrepro.claims.shown): never counted again here
        head = counted.get("headline_text")
        apart = counted.get("apart")
        if not head:
            return "– (none decided at this scale)"
        return f"{head} about the paper; apart: {apart}" if apart else str(head)
    from types import SimpleNamespace

    from distrepro.claims.tally import tally

    info = find_paper(paper, root)
    claims = list(info.spec.claims) if info.spec is not None else []
    known = {c.id for c in claims}
    fields = {"depends_on": "", "miss": "", "p_value": None, "out_of_regime": False, "holm": "", "post_hoc": ""}
    t = tally(claims, [SimpleNamespace(**{**fields, **v}) for v in verdicts if v.get("claim_id") in known])
    if not t.total("headline"):
        return "– (none decided at this scale)" + t.post_hoc_text("headline")
    return t.text(t.of("headline"), "headline") + t.post_hoc_text("headline")


def _shown_scale(result: ScaleResult, scale: str) -> dict[str, Any] | None:
    """The report's tally of the claims decided at ``scale`` (``claims_verdict.json``'s ``by_scale``, written from
    :class:`distrepro.claims.shown.Shown`), or None for a file written before it."""
    entry = (result.verdict_file.get("by_scale") or {}).get(scale)
    decided = entry.get("decided") if isinstance(entry, dict) else None
    return decided if isinstance(decided, dict) and "all_text" in decided else None


def _word(v: dict[str, Any]) -> str:
    """A claim's verdict as the report shows it (``DEPENDS`` included, with what it is evidence about)."""
    shown = v.get("shown")
    if not isinstance(shown, dict):
        return str(v.get("verdict", "–"))
    return shown["word"] if shown.get("about") == "paper" else f"{shown['word']} · {shown['said']}"


def _counts(verdicts: list[dict[str, Any]], group: str | None = None) -> str:
    """PASS/FAIL/INCONCLUSIVE over the counted verdicts; the post-hoc ones apart (marked in their rows)."""
    chosen = [v for v in verdicts if group is None or v.get("group", "headline") == group]
    counted = [v for v in chosen if not v.get("post_hoc")]
    text = " · ".join(f"{sum(v.get('verdict') == k for v in counted)} {k}" for k in ("PASS", "FAIL", "INCONCLUSIVE"))
    post_hoc = len(chosen) - len(counted)
    return text + (f" · {post_hoc} post hoc, not counted" if post_hoc else "")


def _number(x: Any) -> str:
    return "–" if x is None else f"{x:.4g}" if isinstance(x, float) else str(x)


def _statistic(v: dict[str, Any]) -> str:
    if v.get("statistic") is None:
        return "–"
    unit = v.get("unit") or ""
    name = v.get("statistic_name") or ""
    value = _number(v["statistic"]) + ("×" if unit == "x" else f" {unit}" if unit else "")
    return f"{name} {value}".strip()


def _interval(v: dict[str, Any], levels: dict[str, float] | None = None) -> str:
    """``[lo, hi] (97.06 % CI)``: at the level the verdict was judged (a Pocock plan's where one was registered);
    a report older than the verdict's ``ci_level`` gives its claim's ``accept.ci`` (``levels``), else 95 %."""
    ci = v.get("ci")
    if not ci:
        return "–"
    level = v.get("ci_level") or (levels or {}).get(str(v.get("claim_id")))
    return f"[{_number(ci[0])}, {_number(ci[1])}] ({level_text(level)})"


def _levels(verdict_file: dict[str, Any]) -> dict[str, float]:
    """Claim id → its ``accept.ci`` as the report judged it (``claims_verdict.json``'s ``claims``)."""
    out = {}
    for claim in verdict_file.get("claims") or []:
        level = (claim.get("accept") or {}).get("ci") if isinstance(claim, dict) else None
        if level is not None:
            out[str(claim.get("id"))] = float(level)
    return out


def _verdict_cell(v: dict[str, Any]) -> str:
    """The verdict, with POST HOC (and why) or *not frozen* where its pre-registration says so."""
    text = _word(v)
    if v.get("post_hoc"):
        return f"{text} · POST HOC, not counted: {_cell(v['post_hoc'])}"
    return text + (" · not frozen" if v.get("not_frozen") else "")


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _run_note(result: ScaleResult, digest: str, paper: str, root: Path | None = None) -> str:
    """Where the row comes from, and whether it was made on the configs checked in now.

    Where the run's commit is in this checkout's history and its tree was clean, its arms and configs at its scale
    are read at that commit and compared as data with the checkout's (:func:`configs_digest`): a reworded comment
    or a claim's margin does not make its runs stale (the report judges them on the current claims). Otherwise the
    digest the run was tagged with is compared with the checkout's, byte for byte, as before."""
    commit = result.commit[:10] + (" (uncommitted changes)" if result.dirty else "")
    same = None if result.dirty else _same_configs(result, paper, root)
    if same is True:
        made = "made on the current configs (its arms and run configs at this scale, read at its commit)"
    elif same is False:
        made = "**made on other configs**: an arm or its run config at this scale changed since; re-run it"
    elif not result.inputs:
        made = "inputs not recorded (a run older than the `distrepro.inputs` tag)"
    elif result.inputs == digest:
        made = "made on the current paper.yaml and configs"
    else:
        made = f"**made on other inputs ({result.inputs})**: paper.yaml or a config changed since; re-run it"
    return f"run `{result.run_id}` at commit `{commit}`, {made}"


def _same_configs(result: ScaleResult, paper: str, root: Path | None) -> bool | None:
    """Whether ``result`` ran on the checkout's arms and configs at its scale; None when its commit's files cannot
    be read here (no git, a commit this checkout does not have)."""
    from distrepro.tracking.provenance import file_at_commit

    info = find_paper(paper, root)
    if info.path is None or file_at_commit(info.path, result.commit) is None:
        return None
    then = configs_digest(info, result.scale, lambda p: file_at_commit(p, result.commit), root)
    now = configs_digest(info, result.scale, lambda p: p.read_text(encoding="utf-8"), root)
    return then == now


def paper_section(
    paper: str, title: str, digest: str, results: dict[str, ScaleResult], root: Path | None = None
) -> list[str]:
    """One paper's section: the inputs mark, one summary row per scale, then every claim's verdict per scale."""
    lines = [f"## {title} (`{paper}`)", "", *input_marks(paper, digest, root), ""]
    if not results:
        lines += [
            f"Not yet run at this commit (inputs `{digest}`): `distrepro reproduce {paper}`, then `distrepro results`.",
            "",
        ]
        return lines
    order = lambda s: SCALES.index(s) if s in SCALES else len(SCALES)  # noqa: E731
    newest = max(results.values(), key=lambda r: r.ended_ms)
    unrun = {v.get("scale") for v in newest.verdict_file.get("verdicts", [])} - set(results) - {None}
    if not newest.verdict_file.get("by_scale"):
        unrun = set()
    rows = [_summary_row(paper, scale, results, newest, root) for scale in sorted([*results, *unrun], key=order)]
    lines += [f"Inputs `{digest}` (paper.yaml and the arms' configs).", "", table(rows, list(rows[0])), ""]
    for scale in [row["scale"] for row in rows]:
        lines += _scale_claims(paper, scale, results, newest, digest, root)
    return lines


def _summary_row(
    paper: str, scale: str, results: dict[str, ScaleResult], newest: ScaleResult, root: Path | None
) -> dict[str, str]:
    """A scale's row of the paper's summary table; a scale without a reproduction shows the newest report's
    verdicts at it."""
    r = results.get(scale, newest)
    verdicts = scale_verdicts(r, scale)
    ran = scale in results
    multi = bool(r.verdict_file.get("by_scale"))
    per_scale = r.verdict_file.get("n_runs_by_scale") or {}
    if not ran:
        runs = "none"
    elif scale in per_scale:
        runs = str(per_scale[scale])
    else:  # a report written before the count per scale
        runs = str(r.verdict_file.get("n_runs", "–")) + (" (every scale)" if multi else "")
    counted = _shown_scale(r, scale)
    every = counted["all_text"] if counted is not None else _counts(verdicts)
    return {
        "scale": scale,
        "headline (the paper's own claims)": _headline(paper, r, verdicts, root, scale),
        "all claims": every if verdicts else "no claims decided at this scale",
        "runs": runs,
        "run time (wall)": _duration(r.ended_ms - r.started_ms) if ran else "–",
        "commit": f"`{r.commit[:10]}`" + ("+dirty" if r.dirty else "") if ran else "–",
        "date": _utc(r.ended_ms) if ran else "not run",
    }


def _scale_claims(
    paper: str, scale: str, results: dict[str, ScaleResult], newest: ScaleResult, digest: str, root: Path | None
) -> list[str]:
    """A scale's subsection: where its verdicts come from, then every claim's verdict at it."""
    r = results.get(scale, newest)
    note = (
        _run_note(r, digest, paper, root)
        if scale in results
        else f"no reproduction at this scale in the store; the claims judged at it, as the newest report "
        f"(run `{newest.run_id}`) reads them"
    )
    levels = _levels(r.verdict_file)
    claims = [
        {
            "claim": f"`{v['claim_id']}`",
            "group": v.get("group", "headline"),
            "verdict": _verdict_cell(v),
            "statistic": _statistic(v),
            "interval": _interval(v, levels),
            "seeds": str(v.get("n_seeds", "–")),
            "reason": _cell(v.get("reason", "")),
        }
        for v in scale_verdicts(r, scale)
    ]
    table_text = table(claims, list(claims[0])) if claims else "_No claims judged at this scale._"
    return [f"### {paper} at {scale} scale", "", note + ".", "", table_text, ""]


def render_results(
    papers: dict[str, tuple[str, str, dict[str, ScaleResult]]], uri: str, root: Path | None = None
) -> str:
    """The whole file: ``papers`` maps a paper id to (title, inputs digest, results by scale)."""
    store = re.sub(r"//[^/@]*@", "//", uri)  # never print credentials embedded in a server URI
    head = [
        "# Current results",
        "",
        "Generated by `distrepro results` from the tracked runs; do not edit by hand. Each paper's section gives, "
        "per scale, the headline tally (the paper's own claims, each decided by a measurement on the emulated "
        "hardware; post-hoc verdicts are marked and not counted), every claim's verdict with its statistic and its "
        "interval at the level it was judged (95 %, or a pre-registered Pocock plan's), the runs, the run's wall time, "
        "commit and date. How the figures were made and what they mean: `BENCHMARKS.md`, `docs/claims.md`, "
        "each paper's `reports/<paper>/report.html`.",
        "",
        f"Read from `{Path(store).name if store.startswith('sqlite') else store}` on "
        f"{_dt.datetime.now(_dt.UTC).strftime('%Y-%m-%d')}. Regenerate after a reproduction with "
        f"`{REGENERATE}`; a test fails when a paper's `paper.yaml`, arm configs, hardware profiles, the emulator's "
        "error band or the emulator and claims code no longer match the inputs recorded here.",
        "",
    ]
    body: list[str] = []
    for paper, (title, digest, results) in papers.items():
        body += paper_section(paper, title, digest, results, root)
    return "\n".join(head + body).rstrip() + "\n"


def write_results(
    out: Path, tracking_uri: str | None = None, root: Path | None = None, steps: Steps | None = None
) -> Path:
    """Read every known paper's newest reported reproductions from the store and write ``out``; ``steps`` is told
    of each paper read (``distrepro results`` prints it)."""
    from distrepro.tracking.mlflow_client import make_client, resolve_tracking_uri

    steps = steps or Steps()
    uri = tracking_uri or resolve_tracking_uri()
    client = make_client(uri)
    papers: dict[str, tuple[str, str, dict[str, ScaleResult]]] = {}
    known = known_papers(root)
    steps.enter("reading each paper's reports from the tracking store", total=len(known), unit="paper")
    for paper in known:
        info = find_paper(paper, root)
        papers[paper] = (info.title, inputs_digest(info, root), latest_results(client, paper))
        steps.advance()
    steps.enter("writing", str(out))
    return write_text(out.parent, out, render_results(papers, uri, root))
