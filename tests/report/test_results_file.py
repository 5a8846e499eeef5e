"""RESULTS.md: generated from the tracked runs by ``distrepro results``."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from distrepro.report.results_check import stale_papers
from distrepro.report.results_file import ScaleResult, _run_note, paper_section, write_results
from distrepro.reproduction.reproduce import reproduce

REPO = Path(__file__).resolve().parents[2]


def test_results_come_from_the_newest_reproduction_and_say_when_inputs_changed(
    paper_root: Path, mlflow_uri: str, tmp_path: Path
) -> None:
    out = tmp_path / "RESULTS.md"
    write_results(out, mlflow_uri, paper_root)
    assert "Not yet run" in out.read_text() and stale_papers(out.read_text(), paper_root) == []

    done = reproduce("tinypaper", seeds=(0, 1), show_progress=False, root=paper_root)
    write_results(out, mlflow_uri, paper_root)
    text = out.read_text()
    assert "Not yet run" not in text
    tally = r"1 PASS · 0 FAIL · 0 INCONCLUSIVE\s*"
    # its one claim is derived: no headline tally, one PASS among all claims, 2 arms x 2 seeds
    assert re.search(rf"\| proxy\s*\| – \(none decided at this scale\)\s*\| {tally}\| 4\s*\|", text), text
    assert re.search(r"\| `fewer-bytes`\s*\| derived\s*\| PASS · reproduced by our re-implementation.*\| .*2×", text), (
        text
    )
    assert done.run_id in text and "made on the current paper.yaml and configs" in text

    paper = paper_root / "methods" / "tiny" / "paper.yaml"
    paper.write_text(paper.read_text().replace("rel_tolerance: 0.2", "rel_tolerance: 0.25"))
    (problem,) = stale_papers(text, paper_root)  # a claim: the inputs digest (its setup: is unchanged)
    assert problem.startswith("tinypaper: inputs ")
    paper.write_text(paper.read_text().replace("min_seeds: 2", "min_seeds: 3"))  # setup: the frozen mark names it
    assert any(p.startswith("tinypaper: paper.yaml changed since the runs") for p in stale_papers(text, paper_root))
    write_results(out, mlflow_uri, paper_root)
    assert "**made on other inputs" in out.read_text()  # the old run no longer passes for current


def test_a_runs_note_compares_the_configs_read_at_its_commit(paper_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reworded comment or a claim's margin leaves a run current; a changed run config makes it stale; a commit
    this checkout does not have falls back to the digest the run was tagged with."""
    import subprocess

    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(paper_root.parent))

    def git(*args: str) -> str:
        cfg = ["-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "commit.gpgsign=false"]
        done = subprocess.run(["git", *cfg, "-C", str(paper_root), *args], check=True, capture_output=True, text=True)
        return done.stdout.strip()

    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-q", "-m", "runs")
    result = ScaleResult("proxy", "r1", git("rev-parse", "HEAD"), False, "0123456789ab", 0, 1, {})
    paper = paper_root / "methods" / "tiny" / "paper.yaml"
    paper.write_text("# reworded\n" + paper.read_text().replace("rel_tolerance: 0.2", "rel_tolerance: 0.25"))
    assert "made on the current configs" in _run_note(result, "ba9876543210", "tinypaper", paper_root)
    config = paper_root / "methods" / "tiny" / "tiny.yaml"
    config.write_text(config.read_text().replace("steps: 4", "steps: 5"))
    assert "**made on other configs**" in _run_note(result, "ba9876543210", "tinypaper", paper_root)
    unknown = ScaleResult("proxy", "r1", "f" * 40, False, "0123456789ab", 0, 1, {})
    assert "**made on other inputs (0123456789ab)**" in _run_note(unknown, "ba9876543210", "tinypaper", paper_root)


def _verdict(claim: str, scale: str, verdict: str = "PASS") -> dict[str, object]:
    return {"claim_id": claim, "scale": scale, "verdict": verdict, "group": "derived", "reason": f"{claim} here"}


def test_a_report_of_every_scale_shows_each_claim_once_under_the_scale_that_decided_it(paper_root: Path) -> None:
    """One report serves a paper across scales and is logged on each scale's reproduction: RESULTS lists a claim
    only under the scale its verdict is from, and a scale judged but never run (paper scale) gets its own row."""
    file = {
        "verdicts": [_verdict("fewer-bytes", "proxy"), _verdict("at-mid", "mid", "FAIL"), _verdict("big", "paper")],
        "by_scale": {"proxy": {}, "mid": {}, "paper": {}},
        "n_runs": 12,
    }
    results = {
        scale: ScaleResult(scale, f"run-{scale}", "abc", False, "", 1000 * i, 2000 * i, file)
        for i, scale in ((1, "proxy"), (2, "mid"))
    }
    text = "\n".join(paper_section("tinypaper", "Tiny", "d" * 12, results, paper_root))
    sections = dict(re.findall(r"### tinypaper at (\w+) scale\n(.*?)(?=\n### |\Z)", text, flags=re.S))
    assert list(sections) == ["proxy", "mid", "paper"]
    assert "fewer-bytes" in sections["proxy"] and "at-mid" not in sections["proxy"] and "big" not in sections["proxy"]
    assert "at-mid" in sections["mid"] and "fewer-bytes" not in sections["mid"]
    assert "big" in sections["paper"] and "no reproduction at this scale" in sections["paper"]
    assert re.search(r"\| paper\s*\|.*\| none\s*\|.*not run", text), text
    assert re.search(r"\| mid\s*\|.*\| 0 PASS · 1 FAIL · 0 INCONCLUSIVE\s*\| 12 \(every scale\)", text), text


def test_each_scales_row_counts_its_own_runs(paper_root: Path) -> None:
    """A report of every scale counts its runs per scale: each row says how many runs its scale holds."""
    file = {
        "verdicts": [_verdict("fewer-bytes", "proxy"), _verdict("at-mid", "mid", "FAIL")],
        "by_scale": {"proxy": {}, "mid": {}},
        "n_runs": 12,
        "n_runs_by_scale": {"proxy": 8, "mid": 4},
    }
    results = {
        scale: ScaleResult(scale, f"run-{scale}", "abc", False, "", 1000 * i, 2000 * i, file)
        for i, scale in ((1, "proxy"), (2, "mid"))
    }
    text = "\n".join(paper_section("tinypaper", "Tiny", "d" * 12, results, paper_root))
    assert re.search(r"\| proxy\s*\|.*\| 8\s*\|", text) and re.search(r"\| mid\s*\|.*\| 4\s*\|", text), text
    assert "every scale" not in text


def test_a_post_hoc_verdict_is_marked_and_not_counted_and_its_interval_says_its_level(paper_root: Path) -> None:
    """RESULTS.md never shows a Pocock-adjusted interval as a 95 % CI, and a post-hoc PASS is marked in its row and
    left out of the tally."""
    post = {
        **_verdict("fewer-bytes", "proxy"),
        "ci": [1.9, 2.1],
        "ci_level": 0.9706,
        "post_hoc": "changed since the record: hardware profiles: `x.yaml` changed",
    }
    file = {"verdicts": [post], "by_scale": {"proxy": {}}, "n_runs": 4}
    results = {"proxy": ScaleResult("proxy", "run-proxy", "abc", False, "", 1000, 2000, file)}
    text = "\n".join(paper_section("tinypaper", "Tiny", "d" * 12, results, paper_root))
    assert "[1.9, 2.1] (97.06 % CI)" in text and "95 % CI" not in text
    assert "PASS · POST HOC, not counted: changed since the record" in text
    assert "0 PASS · 0 FAIL · 0 INCONCLUSIVE · 1 post hoc, not counted" in text
