"""The default check of the timing verdicts: a share that matches a hand-computed flip, the decisive figure,
the cache, and the mark it leaves in a report (no training; the two hand-built runs of the flip setup)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from sensitivity_setups import FLIP_PAPER, FLIP_PROFILE, SPEED, WORKLOAD, _flip_setup

from distrepro.claims.papers import PaperInfo
from distrepro.claims.schema import validate_paper
from distrepro.hardware.workloads import get_workload
from distrepro.report.build import write_report
from distrepro.report.dependence_section import check_dependence
from distrepro.sensitivity.dependence import CACHE_FILE, DEFAULT_SAMPLES, ClaimShare, Dependence, timing_dependence

BANDWIDTH = "network.inter_node.bandwidth_gbytes_per_s"


@pytest.fixture(scope="module")
def flip_profile(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("dep_profiles") / f"{FLIP_PROFILE['name']}.yaml"
    path.write_text(yaml.safe_dump(FLIP_PROFILE, sort_keys=False))
    return str(path)


@pytest.mark.smoke
def test_the_share_matches_the_hand_computed_flip_and_names_the_link(flip_profile: str, tmp_path: Path) -> None:
    # F1 PASSes below B = P·v/16 (tests/sensitivity/test_sensitivity.py): its share is that point's quantile
    info, rs, jobs = _flip_setup(flip_profile)
    dep = timing_dependence(info, rs, cache_dir=tmp_path, job_for=lambda run_id, seed: jobs[run_id])
    assert dep is not None and not dep.cached and not dep.error
    assert dep.samples == min(DEFAULT_SAMPLES, FLIP_PAPER["setup"]["sensitivity"]["samples"])
    (claim,) = dep.claims  # F2 (accuracy) is not a timing claim
    flip_gb = get_workload(WORKLOAD).param_bytes * SPEED / 16 / 1e9
    quantile = math.log(flip_gb / 0.01) / math.log(10.0 / 0.01)  # log spacing over [0.01, 10]
    assert claim.claim_id == "F1" and abs(claim.share - quantile) <= 1 / dep.samples + 1e-9
    assert claim.decisive == BANDWIDTH and sum(claim.counts.values()) == dep.samples
    assert dep.max_validation_error < 1e-12 and dep.cpu_s > 0


def test_the_check_counts_its_phases_and_settings(flip_profile: str) -> None:
    """What the report's step lines read (:mod:`distrepro.report.stage`): each phase, and each setting re-timed."""
    info, rs, jobs = _flip_setup(flip_profile)
    phases: list[tuple[str, int]] = []
    done: list[int] = []

    class Recorder:
        def phase(self, name: str, total: int) -> None:
            phases.append((name, total))
            done.append(0)

        def advance(self, n: int = 1) -> None:
            done[-1] += n

        def close(self) -> None:
            pass

    timing_dependence(info, rs, 6, job_for=lambda run_id, seed: jobs[run_id], progress=Recorder())
    assert phases == [
        ("rebuilding 2 runs", 2),
        ("re-timing 2 runs at the central values", 0),
        ("re-timing the runs at 6 hardware settings", 6),
    ]
    assert done == [2, 0, 6]


def test_a_second_report_reads_the_cache_until_a_run_changes(flip_profile: str, tmp_path: Path) -> None:
    info, rs, jobs = _flip_setup(flip_profile)
    first = timing_dependence(info, rs, cache_dir=tmp_path, job_for=lambda run_id, seed: jobs[run_id])

    def refuse(run_id: str, seed: int) -> None:
        raise AssertionError("a cached check must not rebuild any run")

    again = timing_dependence(info, rs, cache_dir=tmp_path, job_for=refuse)  # type: ignore[arg-type]
    assert first is not None and again is not None and again.cached and again.shares() == first.shares()
    rs.runs.loc[0, "final/emulated_s"] *= 1.01  # a re-run: the cached shares no longer describe the runs
    fresh = timing_dependence(info, rs, cache_dir=tmp_path, job_for=lambda run_id, seed: jobs[run_id])
    assert fresh is not None and not fresh.cached and fresh.key != first.key
    assert Dependence.from_json("{not json") is None and Dependence.from_json('{"format": 0}') is None
    assert (tmp_path / CACHE_FILE).is_file()


def test_the_cache_key_follows_the_method_plugins_source(
    flip_profile: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replay runs each method's steps, so a plugin edited after the runs must not read the old shares."""
    from distrepro.sensitivity.dependence import cache_key

    info, rs, _ = _flip_setup(flip_profile)
    plugin = tmp_path / "root" / "methods" / "mine" / "method.py"
    plugin.parent.mkdir(parents=True)
    plugin.write_text("STEP = 1\n", encoding="utf-8")
    monkeypatch.setenv("DISTREPRO_PATH", str(tmp_path / "root"))
    before = cache_key(info, rs.runs, 6)
    assert cache_key(info, rs.runs, 6) == before  # nothing changed: the same key
    plugin.write_text("STEP = 2\n", encoding="utf-8")
    assert cache_key(info, rs.runs, 6) != before


def test_a_paper_without_timing_claims_is_not_checked(flip_profile: str) -> None:
    paper = {**FLIP_PAPER, "claims": [c for c in FLIP_PAPER["claims"] if c["id"] == "F2"]}
    info, rs, jobs = _flip_setup(flip_profile, paper)
    assert timing_dependence(info, rs, job_for=lambda run_id, seed: jobs[run_id]) is None


def test_a_run_without_its_config_leaves_its_claim_unmarked_with_the_reason(flip_profile: str) -> None:
    info, rs, _ = _flip_setup(flip_profile)
    dep = check_dependence(info, rs, None)  # the hand-built runs logged no config.resolved.yaml
    assert dep is not None and not dep.claims and "F1" in dep.skipped
    assert "cannot be re-timed" in dep.skipped["F1"]


def test_a_bad_assumption_is_reported_not_raised(flip_profile: str) -> None:
    bad = {**FLIP_PAPER, "setup": {**FLIP_PAPER["setup"], "sensitivity": {"assumptions": [
        {"arm": "nope", "param": "x", "low": 1, "high": 2, "reason": "r"}]}}}  # fmt: skip
    _, rs, _ = _flip_setup(flip_profile)
    info = PaperInfo("flip", validate_paper(bad))
    dep = check_dependence(info, rs, None)
    assert dep is not None and "unknown arm 'nope'" in dep.error and not dep.claims


def test_the_report_marks_the_verdict_and_keeps_it_out_of_the_tally(flip_profile: str, tmp_path: Path) -> None:
    info, rs, jobs = _flip_setup(flip_profile)
    dep = timing_dependence(info, rs, job_for=lambda run_id, seed: jobs[run_id])
    report = write_report(info, rs, tmp_path / "flip", root=tmp_path, dependence=dep)
    md = report.markdown.read_text()
    f1 = next(v for v in report.verdicts if v.claim_id == "F1")
    assert dep is not None and 0.05 < dep.claims[0].share < 0.95
    assert f1.depends_on == BANDWIDTH and f1.pass_share == dep.claims[0].share
    assert "### Timing verdicts over the plausible hardware" in md and "1 depends on an assumption" in md
    assert f"apart: depends on `{BANDWIDTH}`" in md and "--no-sensitivity" in md
    assert "## Sensitivity of the timing verdicts" not in md  # the full sweep stays with --sensitivity


def test_a_merged_unit_is_counted_once_with_its_share_in_the_section() -> None:
    # two timing claims merged by counts_with, each PASSing in one (different) of 32 settings: the section shows
    # both shares and the unit's, the unit's 2/32 marks both members, the tally counts it once, apart
    from distrepro.claims.tally import tally
    from distrepro.claims.verdicts import Verdict
    from distrepro.report.dependence_section import apply, dependence_section

    speed = {"kind": "speedup", "arm": "fast", "claimed": 2.0, "source": {"kind": "text"}, "evidence": "verbatim"}
    spec = validate_paper({
        "kind": "reproduction", "citation": {"id": "x", "title": "X"}, "setup": {"baseline": "base"},
        "claims": [{**speed, "id": "A-C2"}, {**speed, "id": "A-C4", "counts_with": "A-C2"}],
    })  # fmt: skip

    def one(cid: str, at: int) -> ClaimShare:
        verdicts = ["PASS" if k == at else "FAIL" for k in range(32)]
        return ClaimShare(cid, 1 / 32, {"PASS": 1, "FAIL": 31, "INCONCLUSIVE": 0}, BANDWIDTH, verdicts)

    dep = Dependence(32, 7, [BANDWIDTH], [one("A-C2", 4), one("A-C4", 20)], {})
    again = Dependence.from_json(dep.to_json())
    assert again is not None and again.settings() == dep.settings() and again.shares() == dep.shares()
    verdicts = [Verdict("A-C2", "speedup", "FAIL", "", miss="falls short of the claim"),
                Verdict("A-C4", "speedup", "FAIL", "", miss="exceeds the claim")]  # fmt: skip
    apply(again, verdicts, spec.claims)
    assert [(v.depends_on, v.unit_pass_share) for v in verdicts] == [(BANDWIDTH, 2 / 32)] * 2
    md = dependence_section(again, verdicts, "x")
    assert (
        "| A-C2 | FAIL | 3 % (its unit with A-C4: 6 %) |" in md
        and "| A-C4 | FAIL | 3 % (its unit with A-C2: 6 %) |" in md
    )
    assert f"apart: depends on `{BANDWIDTH}`" in md
    t = tally(spec.claims, verdicts)
    assert t.depends == {"headline": 1} and t.total("headline") == 1 and t.of("headline")["FAIL"] == 0
