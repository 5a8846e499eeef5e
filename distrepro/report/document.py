"""``report.md``: the report's Markdown, section by section, from one :class:`~distrepro.report.judging.Judgement`.

The order is the reader's: the answer and what decides it first (title, contents, first screen, provenance), then
the claims, the runs, the figures, what the paper's products hook wrote, the environment and the known deviations.
Each section is its own function so that a change to one cannot shift another; :func:`markdown_document` only
lays them end to end.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from pathlib import Path

import distrepro
from distrepro.claims.evidence import group_of
from distrepro.report import claims_sections as claims_sec
from distrepro.report import sections as sec
from distrepro.report.deciding_runs import deciding_runs
from distrepro.report.figure_set import FIGURE_TEXT, representatives
from distrepro.report.headline import first_screen, provenance
from distrepro.report.html import contents
from distrepro.report.judging import Judgement
from distrepro.report.scales import ScaledVerdicts, scale_table

#: where the table of contents goes on the first screen (replaced once the report's sections are known)
_CONTENTS = "<!-- contents -->"


def markdown_document(
    judged: Judgement,
    drawn: Mapping[str, Path],
    out: Path,
    root: Path,
    extra: str = "",
    prereg: str = "",
    captions: Mapping[str, str] | None = None,
) -> str:
    """The whole ``report.md``: ``drawn`` the figures by key, ``extra`` the sections added after the claims (the
    sensitivity or dependence section, the method folders' own), ``captions`` what the paper's products hook
    declared for its files (file name -> caption)."""
    parts = [*_opening(judged, root, prereg), *_claims(judged)]
    if extra:  # e.g. the sensitivity of the timing verdicts (distrepro/report/sensitivity_section.py)
        parts += [extra]
    parts += [*_runs(judged), *_figures(drawn, out), *_products(out, captions or {}), *_environment(judged, root)]
    text = "\n".join(parts).rstrip() + "\n"
    return text.replace(_CONTENTS, contents(text), 1)


def _opening(judged: Judgement, root: Path, prereg: str) -> list[str]:
    """Title, contents, the answer, the runs that would decide the rest, caveats, provenance and the citation."""
    info, rs, verdicts = judged.info, judged.rs, judged.verdicts
    spec = info.spec
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    n_done = int((rs.runs["status"] == "FINISHED").sum())
    # the contents under the title: after the answer and the caveats it fell below a laptop's first screen
    kind = "exploratory reproduction report" if judged.exploratory else "reproduction report"
    parts = [f"# {info.title} — {kind}", "", _CONTENTS, ""]  # filled in once every section is known
    if judged.exploratory:  # seeds outside the record: never to be read as the registered test
        parts += [
            f"**Exploratory**: these verdicts judge only the runs on seeds outside the pre-registration record; they "
            f"are not the registered test (`reports/{info.id}/report.md`) and RESULTS.md does not read them.",
            "",
        ]
    screen = first_screen(spec, verdicts, judged.display)  # the answer first (distrepro.report.headline)
    if screen:
        parts += [screen]
    deciding = deciding_runs(info, verdicts, root)  # headline claims only a larger scale decides: the command, cost
    if deciding:
        parts += [deciding]
    parts += [sec.caveats(rs.runs), ""]
    failed_training = sec.diverged(rs.runs)  # a NaN loss: the model that was judged is a diverged one
    if failed_training:
        parts += [failed_training, ""]
    parts += [provenance(info, rs, n_done, now, distrepro.__version__)]
    if prereg:  # which verdicts a test fixed in advance decided, and every choice made after seeing them
        parts += ["", prereg]
    if spec is not None:
        c = spec.citation
        cite = ", ".join(x for x in (c.authors, f"*{c.title}*", c.venue) if x)
        parts += ["", f"> {cite}" + (f". <{c.url}>" if c.url else "")]
    return parts


def _claims(judged: Judgement) -> list[str]:
    """The tally, the claims tables, the verdicts by scale, conflicting claims and every claim's details."""
    spec, verdicts = judged.info.spec, judged.verdicts
    parts = ["", "## Claims", ""]
    if spec is None or not spec.claims:
        return [*parts, "_No claims are encoded for this paper yet; the report shows the runs found._"]
    shown = judged.display
    parts += [claims_sec.tally_text(spec, verdicts, shown), "", claims_sec.grouped_claims_tables(spec, verdicts, shown)]
    parts += _by_scale(judged.scaled, {c.id: group_of(c) for c in spec.claims})
    conflicts = claims_sec.conflicts_section(spec)
    if conflicts:
        parts += ["### Claims that cannot all hold", "", conflicts]
    return [*parts, "### Claim details", "", claims_sec.claim_details(spec, verdicts, shown)]


def _by_scale(scaled: ScaledVerdicts | None, groups: Mapping[str, str]) -> list[str]:
    """Each claim's verdict at every scale the runs hold; with one scale, the arms it lacks (partial runs)."""
    by_scale = scale_table(scaled, groups) if scaled else ""
    if not by_scale:
        return []
    several = len(scaled.by_scale) > 1 if scaled else False
    return [
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


def _runs(judged: Judgement) -> list[str]:
    """Every run, the arms' time against the compute bounds, and the runs no verdict reads (not finished)."""
    runs, labels = judged.rs.runs, judged.labels
    parts = ["## Runs", "", sec.runs_table(runs, labels)]
    bounds = sec.time_bounds_table(runs, labels)
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
    bad = runs[runs["status"] != "FINISHED"]
    if len(bad):
        parts.append(
            "Not finished (ignored by every verdict): "
            + ", ".join(
                f"{labels[r]} seed {s} `{st}` ({r})" for r, s, st in zip(bad.run_id, bad.seed, bad.status, strict=True)
            )
            + "\n"
        )
    return parts


def _figures(drawn: Mapping[str, Path], out: Path) -> list[str]:
    """The harness's figures with their titles and captions (a section's own figures are shown in that section)."""
    parts = ["## Figures", ""]
    for key, path in drawn.items():
        if key not in FIGURE_TEXT:  # a section's own figure, shown in that section
            continue
        title, caption = FIGURE_TEXT[key]
        parts += [f"### {title}", "", f"![{title}]({path.relative_to(out).as_posix()})", "", f"_{caption}_", ""]
    return parts


def _products(out: Path, captions: Mapping[str, str]) -> list[str]:
    """Every PNG the paper's products hook wrote beside the report, under the caption the hook declared (else one
    naming the hook), and the CSV of its numbers when one lies beside it. The report names no product itself:
    what a product shows is the plugin's to say (:class:`distrepro.api.Product`)."""
    products = sorted(out.glob("*.png"))
    if not products:
        return []
    parts = ["## Products beyond the arms", ""]
    for path in products:
        data = path.with_suffix(".csv")
        where = f"; its numbers: `{data.name}`" if data.is_file() else ""
        caption = captions.get(path.name) or _undeclared_caption(path)
        parts += [f"![{path.stem}]({path.name})", "", f"_{caption}{where}._", ""]
    return parts


def _undeclared_caption(path: Path) -> str:
    return f"`{path.name}`, written by the paper's products hook (`products.py` in its method folder)"


def _environment(judged: Judgement, root: Path) -> list[str]:
    """The hardware and software of the runs, then each method's known deviations from its README."""
    info, rs, labels = judged.info, judged.rs, judged.labels
    parts = ["## Environment", "", sec.environment(rs.runs, labels), "## Known deviations", ""]
    reps = representatives(rs.runs, labels)
    for method in sorted(rs.runs["method"].unique()):
        run_id = next((r for r in reps.values() if rs.runs.set_index("run_id").at[r, "method"] == method), None)
        text, origin = sec.readme_for(
            method, rs.artifact_text(run_id, "method_README.md") if run_id else None, info.method_dirs, root
        )
        parts += [f"### {method}", ""]
        parts += [f"_README {origin}._", "", sec.deviations(text)] if text else ["_No README found._", ""]
    return parts
