"""BENCHMARKS.md stays whole: one `##` section per reproduced paper, each running only its own paper.

Commit 98f8fa9 lost the Chao results table and the C-ADP heading, leaving the C-ADP commands and
figures under "Chao et al. reproduction". These checks tie the document to the nox sessions
(``reproduce-<paper>``, one per ``methods/*/paper.yaml`` of kind reproduction) so it cannot drift again.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from noxmodule import noxfile_module

REPO = Path(__file__).resolve().parents[1]
HEADING = re.compile(r"^## (?P<title>.+)$", re.M)
REPRODUCTION = re.compile(r"reproduction \(`(?P<paper>[A-Za-z0-9_.-]+)`\)\s*$")
COMMAND = re.compile(r"(?:nox -s reproduce-|distrepro reproduce |reproduce\(\")(?P<paper>[A-Za-z0-9_.-]+)")

pytestmark = pytest.mark.smoke


def _sections(text: str) -> list[tuple[str, str]]:
    """(heading, body) of every `##` section; the preamble before the first one is left out."""
    marks = list(HEADING.finditer(text))
    ends = [m.start() for m in marks[1:]] + [len(text)]
    return [(m["title"], text[m.end() : end]) for m, end in zip(marks, ends, strict=True)]


def _nox_papers() -> set[str]:
    return set(noxfile_module()._papers())


def test_reproduction_sections_are_the_nox_reproduce_sessions() -> None:
    sections = _sections((REPO / "BENCHMARKS.md").read_text(encoding="utf-8"))
    named = [m["paper"] for title, _ in sections if (m := REPRODUCTION.search(title))]
    assert len(named) == len(set(named)), f"a paper has two sections: {named}"
    assert set(named) == _nox_papers()


def test_each_section_runs_only_the_paper_it_names() -> None:
    for title, body in _sections((REPO / "BENCHMARKS.md").read_text(encoding="utf-8")):
        own = REPRODUCTION.search(title)
        ran = {m["paper"] for m in COMMAND.finditer(body)}
        if own:
            assert ran <= {own["paper"]}, f"section '{title}' runs {sorted(ran)}"
            assert own["paper"] in ran, f"section '{title}' gives no command for its paper"
        else:
            assert not ran, f"section '{title}' reproduces {sorted(ran)} but names no paper"


def test_the_readme_names_every_reproduced_paper() -> None:
    """README.md's "Reproduced so far" sentence once left out QSR and Decent-DP: it lists every nox paper."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    sentence = text.split("Reproduced so far:", 1)[1].split("BENCHMARKS.md", 1)[0]
    listed = set(re.findall(r"`([A-Za-z0-9_.-]+)` \(", sentence))
    assert listed == _nox_papers()


def test_each_paper_section_opens_with_its_current_results() -> None:
    """A reader finds the current figures first: each paper's section opens with ``### Current results`` (its
    command, its run time, where the current verdicts are), and older runs go below it or to CHANGELOG.md."""
    for title, body in _sections((REPO / "BENCHMARKS.md").read_text(encoding="utf-8")):
        if not (own := REPRODUCTION.search(title)):
            continue
        subsections = re.findall(r"(?m)^### (.+)$", body)
        assert subsections and subsections[0] == "Current results", f"'{title}' opens with {subsections[:1]}"
        current = body.split("### Current results", 1)[1].split("\n### ", 1)[0]
        assert f"reproduce-{own['paper']}" in current, f"'{title}': its current results give no command"
        assert "RESULTS.md" in current and "Run time" in current, f"'{title}': no run time or RESULTS.md pointer"


#: the documents hold what is current: BENCHMARKS.md one section per benchmark and paper, README.md the pitch, the
#: two commands, the session table and pointers (the reference lives under docs/)
MAX_BENCHMARKS_LINES, MAX_README_LINES = 1200, 150


def test_the_documents_stay_short_enough_to_hold_only_what_is_current() -> None:
    benchmarks = (REPO / "BENCHMARKS.md").read_text(encoding="utf-8").splitlines()
    readme = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(benchmarks) <= MAX_BENCHMARKS_LINES, "move superseded figures to CHANGELOG.md"
    assert len(readme) <= MAX_README_LINES, "move reference material under docs/"


def test_no_line_is_both_a_current_figure_and_history() -> None:
    """A figure is current (BENCHMARKS.md) or history (CHANGELOG.md), never both: a long line or a heading of
    BENCHMARKS.md that CHANGELOG.md repeats word for word is a table or paragraph kept in two places."""
    history = {line.strip() for line in (REPO / "CHANGELOG.md").read_text(encoding="utf-8").splitlines()}
    both = [
        line
        for line in (REPO / "BENCHMARKS.md").read_text(encoding="utf-8").splitlines()
        if (len(line.strip()) > 40 or line.startswith("#")) and line.strip() in history
    ]
    assert both == []
