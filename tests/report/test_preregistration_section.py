"""The report stamps its scale's pre-registration record and says, in the report itself, which claims are post hoc."""

from __future__ import annotations

import copy
import dataclasses
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml
from test_report import SYNTH_CLAIMS, synthetic_runset

from distrepro.claims.papers import PaperInfo
from distrepro.claims.preregistration import build_record, record_digest, record_path, write_record
from distrepro.claims.schema import at_scale, load_paper_file
from distrepro.report.build import write_report


def _paper(tmp_path: Path, claims: dict) -> Path:
    folder = tmp_path / "synth"
    folder.mkdir(exist_ok=True)
    path = folder / "paper.yaml"
    path.write_text(yaml.safe_dump(claims, sort_keys=False))
    return path


def _report(tmp_path: Path, paper_file: Path) -> str:
    info = PaperInfo("synth", at_scale(load_paper_file(paper_file), "proxy"), path=paper_file)
    return write_report(info, synthetic_runset(), tmp_path / "out", root=tmp_path).markdown.read_text()


def _register(paper_file: Path, seeds: list[int], looks: list[int] | None = None) -> Path:
    spec = at_scale(load_paper_file(paper_file), "proxy")
    return write_record(
        build_record("synth", paper_file, spec, "proxy", seeds, looks), record_path(paper_file, "proxy")
    )


def test_without_a_record_every_verdict_is_called_exploratory(tmp_path: Path) -> None:
    md = _report(tmp_path, _paper(tmp_path, SYNTH_CLAIMS))
    section = md[md.index("## Pre-registration") : md.index("## Claims")]
    assert "No pre-registration record for the proxy scale" in section and "exploratory" in section


def test_report_stamps_the_record_and_marks_an_edited_claim_post_hoc(tmp_path: Path) -> None:
    paper_file = _paper(tmp_path, SYNTH_CLAIMS)
    record = _register(paper_file, [0, 1, 2])
    edited = copy.deepcopy(SYNTH_CLAIMS)
    edited["claims"][2]["accept"] = {"abs_tolerance": 0.2}  # S3's band widened after the registration
    _paper(tmp_path, edited)
    md = _report(tmp_path, paper_file)
    section = md[md.index("## Pre-registration") : md.index("## Claims")]
    assert f"sha256 `{record_digest(record)}`" in section
    assert "confirmatory seeds 0-2 (n = 3); fixed n = 3, 95 % intervals" in section
    assert "- `S3`: **post hoc**: edited after registration" in section
    assert "`S1`" not in section and "`S2`" not in section  # unchanged claims are not marked
    assert "exploratory" not in section  # the runs used the registered seeds


def test_post_hoc_notes_and_unregistered_seeds_are_in_the_report(tmp_path: Path) -> None:
    claims = copy.deepcopy(SYNTH_CLAIMS)
    claims["claims"][0]["post_hoc"] = "seed count raised from 5 to 10 after an INCONCLUSIVE"
    paper_file = _paper(tmp_path, claims)
    _register(paper_file, list(range(100, 110)), looks=[5, 10])
    md = _report(tmp_path, paper_file)
    section = md[md.index("## Pre-registration") : md.index("## Claims")]
    assert "- `S1`: seed count raised from 5 to 10 after an INCONCLUSIVE" in section
    assert "Pocock group-sequential plan, looks at [5, 10] seeds, each judged with a 97.06 % interval" in section
    assert "seeds outside the registered ones (0, 1, 2) are exploratory" in section


def test_a_declared_plan_sets_the_interval_level_verdicts_use(tmp_path: Path) -> None:
    paper_file = _paper(tmp_path, SYNTH_CLAIMS)
    before = _report(tmp_path, paper_file)
    _register(paper_file, [0, 1, 2], looks=[2, 3])
    after = _report(tmp_path, paper_file)
    s3 = [ln for ln in (before, after) for ln in ln.splitlines() if "(S3; table)" in ln]
    from distrepro.claims.sequential import level_text, pocock_level

    assert "(95 % CI, 3 seeds)" in s3[0]
    pocock = level_text(pocock_level([2, 3]))  # its real level, never rounded to "97%" or called "95 %"
    assert f"({pocock}, 3 seeds)" in s3[1] and pocock != "95 % CI"  # Pocock at looks 2 and 3: a wider interval


def test_a_pilot_block_prints_one_line_per_claim(tmp_path: Path) -> None:
    from distrepro.report.preregistration_section import preregistration_section

    paper_file = _paper(tmp_path, SYNTH_CLAIMS)
    spec = at_scale(load_paper_file(paper_file), "proxy")
    planned = {"headline": True, "status": "planned", "pilot_seeds": 5, "s": 0.04, "d": 0.0953, "on": "log", "n": 6}
    block = {
        "seeds": [0, 1, 2, 3, 4],
        "campaigns": ["a" * 32],
        "power": 0.8,
        "max_seeds": 30,
        "n": 6,
        "n_from": "the largest over the planned headline claims",
        "claims": {
            "S1": {**planned, "d_from": "the tolerance around the claimed value"},
            "S2": {**planned, "headline": False, "status": "not resolvable by seeds at this scale", "n": None},
            "S4": {"headline": True, "status": "not planned: no finished pilot run with a value of arm(s) nothere"},
        },
    }
    seeds = list(range(100, 106))
    record = build_record("synth", paper_file, spec, "proxy", seeds, pilot=block)
    write_record(record, record_path(paper_file, "proxy"))
    section = preregistration_section(spec, paper_file, "proxy")
    assert "A pilot on seeds 0-4, campaign(s) aaaaaaaaaaaa (discarded from confirmation)" in section
    assert "80 % power" in section and "n = 6, the largest over the planned headline claims (cap 30 seeds)" in section
    s1 = "- `S1`: s = 0.04 on the log scale (5 pilot seeds), d = 0.0953 (the tolerance around the claimed value)"
    assert f"{s1}; needs 6 seeds" in section
    assert "- `S2` (not headline: does not set n): s = 0.04" in section
    assert "needs more than 30 seeds: not resolvable by seeds at this scale" in section
    assert "- `S4`: not planned: no finished pilot run with a value of arm(s) nothere" in section


def test_a_record_without_a_pilot_prints_no_plan(tmp_path: Path) -> None:
    from distrepro.report.preregistration_section import preregistration_section

    paper_file = _paper(tmp_path, SYNTH_CLAIMS)
    _register(paper_file, [100, 101, 102])
    section = preregistration_section(at_scale(load_paper_file(paper_file), "proxy"), paper_file, "proxy")
    assert "confirmatory seeds 100-102" in section and "pilot" not in section


def _register_at(paper_file: Path, seeds: list[int], when: str) -> Path:
    import datetime as dt

    spec = at_scale(load_paper_file(paper_file), "proxy")
    now = dt.datetime.fromisoformat(when).replace(tzinfo=dt.UTC)
    record = build_record("synth", paper_file, spec, "proxy", seeds, now=now)
    return write_record(record, record_path(paper_file, "proxy"))


def test_a_post_hoc_verdict_is_marked_everywhere_and_left_out_of_the_tally(tmp_path: Path) -> None:
    """S3's band widened after a record written before the runs (2026-01-01): S3 alone is post hoc, in its headline
    sentence, its claim row and claims_verdict.json, and it is not counted; the record states what it freezes and
    its full commit."""
    import json

    paper_file = _paper(tmp_path, SYNTH_CLAIMS)
    _register_at(paper_file, [0, 1, 2], "2025-12-01T00:00:00")
    edited = copy.deepcopy(SYNTH_CLAIMS)
    edited["claims"][2]["accept"] = {"abs_tolerance": 0.2}
    _paper(tmp_path, edited)
    md = _report(tmp_path, paper_file)
    data = json.loads((tmp_path / "out" / "claims_verdict.json").read_text())
    marks = {v["claim_id"]: v["post_hoc"] for v in data["verdicts"]}
    assert marks["S3"] == "claim edited after registration" and marks["S1"] == marks["S2"] == ""
    (sentence,) = [ln for ln in md.splitlines() if "(S3; table)" in ln and ln.startswith("- ")]
    assert sentence.startswith("- **POST HOC** · ") and "not counted" in sentence
    (row,) = [ln for ln in md.splitlines() if ln.startswith("| S3")]
    assert "POST HOC, not counted: claim edited after registration" in row
    assert "1 more is post hoc and not counted" in md
    section = md[md.index("## Pre-registration") : md.index("## Claims")]
    assert "The record freezes paper.yaml (1)" in section and "emulator and claims code (1)" in section
    assert re.search(r"at commit (unknown \(the record was written outside a git checkout|`[0-9a-f]{40}`)", section)


def test_a_record_newer_than_the_runs_makes_every_verdict_post_hoc(tmp_path: Path) -> None:
    paper_file = _paper(tmp_path, SYNTH_CLAIMS)
    _register_at(paper_file, [0, 1, 2], "2026-02-01T00:00:00")  # after the synthetic runs started (2026-01-01)
    md = _report(tmp_path, paper_file)
    assert "is newer than the first confirmatory run it judges (run equal-0 on seed 0" in md
    assert "Of the paper's 0 headline claims" in md or "post hoc and not counted" in md
    section = md[md.index("## Pre-registration") : md.index("## Claims")]
    assert "No claim judged here was chosen or changed" not in section  # never certified beside the reasons


def _report_of(tmp_path: Path, paper_file: Path, runs: pd.DataFrame) -> str:
    info = PaperInfo("synth", at_scale(load_paper_file(paper_file), "proxy"), path=paper_file)
    rs = dataclasses.replace(synthetic_runset(), runs=runs)
    return write_report(info, rs, tmp_path / "out", root=tmp_path).markdown.read_text()


def test_a_run_seen_before_the_record_counts_though_a_rerun_replaced_it(tmp_path: Path) -> None:
    """The runs the report keeps started after the record, but seed 0 had run (and failed) before it: its verdicts
    were seen, so every verdict is post hoc, naming that run, not certified."""
    paper_file = _paper(tmp_path, SYNTH_CLAIMS)
    _register_at(paper_file, [0, 1, 2], "2026-02-01T00:00:00")
    runs = synthetic_runset().runs
    runs["start_time"] = runs["start_time"] + pd.Timedelta(days=60)  # every kept run after the record
    assert "newer than the first confirmatory run" not in _report_of(tmp_path, paper_file, runs)
    early = runs.iloc[[0]].assign(
        run_id="equal-0-seen", status="FAILED", start_time=pd.Timestamp("2026-01-15", tz="UTC")
    )
    md = _report_of(tmp_path, paper_file, pd.concat([early, runs], ignore_index=True))
    assert "newer than the first confirmatory run it judges (run equal-0-seen on seed 0, started 2026-01-15" in md
    assert "No claim judged here was chosen or changed" not in md


def test_a_late_record_without_a_frozen_block_still_says_why(tmp_path: Path) -> None:
    """The reasons that make every verdict post hoc are shown for a record without ``frozen:`` too."""
    paper_file = _paper(tmp_path, SYNTH_CLAIMS)
    path = _register_at(paper_file, [0, 1, 2], "2026-02-01T00:00:00")
    old = yaml.safe_load(path.read_text())
    old.pop("frozen")
    path.write_text(yaml.safe_dump(old, sort_keys=False))
    section = _report(tmp_path, paper_file).split("## Pre-registration")[1].split("## Claims")[0]
    assert "**Not frozen**" in section and "Every verdict at this scale is **post hoc**" in section
    assert "newer than the first confirmatory run" in section and "No claim judged here" not in section


def test_what_cannot_be_checked_is_said_instead_of_certified(tmp_path: Path) -> None:
    """Without a comparison with the runs, with runs that record no start, or with a registered claim dropped from
    paper.yaml, the section does not say that nothing was chosen after the verdicts were seen."""
    from distrepro.claims.certification import Standing
    from distrepro.report.preregistration_section import preregistration_section

    certified = "No claim judged here was chosen or changed after its verdicts were seen."
    paper_file = _paper(tmp_path, SYNTH_CLAIMS)
    _register_at(paper_file, [0, 1, 2], "2025-12-01T00:00:00")
    spec = at_scale(load_paper_file(paper_file), "proxy")
    assert certified in preregistration_section(spec, paper_file, "proxy", standing=Standing({}, [], []))
    unchecked = preregistration_section(spec, paper_file, "proxy")
    assert "Not checked against the runs" in unchecked and certified not in unchecked
    undated = Standing(
        {}, [], [], unchecked=["runs on seed(s) 1 record no start: whether the record preceded them is unknown"]
    )
    section = preregistration_section(spec, paper_file, "proxy", standing=undated)
    assert "**Not certified**: runs on seed(s) 1 record no start" in section and certified not in section
    dropped = copy.deepcopy(SYNTH_CLAIMS)
    dropped["claims"] = dropped["claims"][1:]  # S1 registered, then removed
    _paper(tmp_path, dropped)
    section = preregistration_section(
        at_scale(load_paper_file(paper_file), "proxy"), paper_file, "proxy", standing=Standing({}, [], [])
    )
    assert "- `S1`: **post hoc**: registered, then removed from paper.yaml." in section and certified not in section


def test_an_older_record_marks_its_verdicts_not_frozen(tmp_path: Path) -> None:
    paper_file = _paper(tmp_path, SYNTH_CLAIMS)
    path = _register_at(paper_file, [0, 1, 2], "2025-12-01T00:00:00")
    old = yaml.safe_load(path.read_text())
    old.pop("frozen")
    path.write_text(yaml.safe_dump(old, sort_keys=False))
    md = _report(tmp_path, paper_file)
    assert "**Not frozen**: this record does not freeze setup, profiles, code" in md
    assert "not frozen (its record predates frozen inputs)" in md and "POST HOC" not in md


@pytest.mark.smoke
def test_a_record_written_outside_git_is_never_stamped_clean() -> None:
    """ "at commit `unknown (not a git checkout)` (clean)" certified a checkout state nobody could see."""
    from distrepro.report.preregistration_section import _commit_text

    unknown = {"commit": "unknown (not a git checkout)", "frozen": {"commit": "unknown (not a git checkout)"}}
    text = _commit_text(unknown)
    assert "clean" not in text and "outside a git checkout" in text and "cannot be checked" in text, text
    known = {"frozen": {"commit": "a" * 40, "dirty": []}}
    assert _commit_text(known) == f"`{'a' * 40}` (clean)"
