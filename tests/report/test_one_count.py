"""Every output prints the same verdicts: for every shipped paper, one fabricated verdict set rendered by the
console, the report (Markdown and HTML), ``claims_verdict.json`` and the RESULTS.md section gives the same word per
claim id and the same counts (no training: the rendering functions the report uses, on one verdict set)."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from distrepro.claims.attribution import attribute
from distrepro.claims.papers import find_paper, known_papers
from distrepro.claims.runs import RunSet
from distrepro.claims.shown import show
from distrepro.claims.verdicts import Verdict
from distrepro.cli.common import verdict_lines
from distrepro.report.build import Report, verdicts_payload
from distrepro.report.claims_sections import grouped_claims_tables, tally_text
from distrepro.report.headline import first_screen
from distrepro.report.html import render_html
from distrepro.report.judging import Judgement
from distrepro.report.results_file import ScaleResult, paper_section

PAPERS = [p for p in known_papers() if (info := find_paper(p)).spec is not None and info.spec.claims]


def _fabricate(spec: Any) -> list[Verdict]:
    """One verdict per claim, cycling through every word: PASS, FAIL short, FAIL over, INCONCLUSIVE, DEPENDS."""
    out = []
    for i, claim in enumerate(spec.claims):
        kind = i % 5
        v = Verdict(claim.id, claim.kind, ("PASS", "FAIL", "FAIL", "INCONCLUSIVE", "PASS")[kind], f"reason {i}")  # type: ignore[arg-type]
        v.statistic, v.unit, v.n_seeds, v.p_value = 1.0 + i, "x", 5, 1e-4 * (i + 1)
        v.miss = {1: "falls short of the claim", 2: "exceeds the claim"}.get(kind, "")
        if kind == 4:
            v.depends_on, v.pass_share = "the inter-node bandwidth", 0.4
        v.model_covered = v.model_holds = i % 2 == 0
        out.append(v)
    return out


class _Rows(HTMLParser):
    """Table rows of an HTML page, as lists of cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self.rows:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _word(cell: str) -> str:
    return cell.split(" · ")[0].strip()


@pytest.mark.parametrize("paper", PAPERS)
def test_every_output_prints_the_same_verdicts(paper: str, tmp_path: Path, capsys: Any) -> None:
    info = find_paper(paper)
    spec = info.spec
    verdicts = _fabricate(spec)
    attribute(spec, verdicts)
    shown = show(spec, verdicts)  # the one structure every output reads
    words = {r.claim_id: r.word for r in shown.rows}
    assert "DEPENDS" in words.values() or len(spec.claims) < 5

    # console (distrepro report / reproduce)
    report = Report(paper, tmp_path, tmp_path / "r.md", tmp_path / "r.html", {}, verdicts, claims=list(spec.claims))
    report.shown = shown
    console = verdict_lines(report)
    assert {ln.split()[1]: ln.split()[0] for ln in console} == words
    assert report.summary() == shown.tally.summary()

    # the report's first screen, tally and claims tables, Markdown and HTML
    md = "\n\n".join(
        [
            first_screen(spec, verdicts, shown),
            tally_text(spec, verdicts, shown),
            grouped_claims_tables(spec, verdicts, shown),
        ]
    )
    sentences = {m[2]: m[1] for m in re.finditer(r"^- \*\*(\w+)\*\* · .*?\((\S+?); ", md, re.M)}
    assert sentences == {c.id: words[c.id] for c in spec.claims if shown.of(c.id).group == "headline"}
    parser = _Rows()
    parser.feed(render_html(md, tmp_path, "t"))
    header = next(r for r in parser.rows if "verdict" in r)
    table = {r[0].split(":")[0]: _word(r[header.index("verdict")]) for r in parser.rows if r and r[0] != "claim"}
    assert table == words
    t = shown.tally
    assert f"**Headline: {t.text(t.of('headline'), 'headline')}**" in md

    # claims_verdict.json
    rs = RunSet(
        f"distrepro/{paper}", "sqlite:///nowhere.db", pd.DataFrame({"status": []}), pd.DataFrame(), pd.DataFrame()
    )
    judged = Judgement(info, rs, {}, verdicts, None, None, spec.setup.scale, shown)
    data = json.loads(json.dumps(verdicts_payload(judged), default=str))
    assert {v["claim_id"]: v["shown"]["word"] for v in data["verdicts"]} == words
    assert data["tally"]["summary"] == shown.tally.summary()

    # RESULTS.md: each scale's section lists the claims decided there with the same word, and counts them the same
    results = {s: ScaleResult(s, f"run-{s}", "0" * 40, False, "", 0, 1000, data) for s in data["by_scale"]}
    section = "\n".join(paper_section(paper, info.title, "digest", results))
    rows = dict(re.findall(r"^\| `(\S+)`\s*\| \w+\s*\| ([A-Z]+)\b", section, re.M))
    assert rows == words
    for scale, entry in data["by_scale"].items():
        decided = entry["decided"]
        assert decided["all_text"] in section, scale
        if decided["headline_text"]:
            assert decided["headline_text"] in section
    # the unit tallies add up: every claim once, merged units once
    assert t.total() + t.merged == len(spec.claims)
