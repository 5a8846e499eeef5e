"""Every INCONCLUSIVE names what would decide it (distrepro/report/next_steps.py), and a --seeds below a claim's
minimum is said before training."""

from __future__ import annotations

from pathlib import Path

import pytest
from tiny_paper import PAPER, paper_root  # noqa: F401  (the fixture)

from distrepro.claims.papers import find_paper
from distrepro.claims.verdicts import Verdict
from distrepro.report import next_steps

ACCURACY_CLAIM = """\
  - id: as-accurate
    kind: relative_improvement
    arm: local
    baseline: sync
    metric: final/val_accuracy
    direction: max
    form: ratio
    claimed: 1.0
    accept: {statistic: median, rel_tolerance: 0.5}
    source: {kind: text, quote: "as accurate as synchronous training"}
    evidence: derived
"""


def _info(root: Path, mid: bool):
    folder = root / "methods" / "tiny"
    (folder / "paper.yaml").write_text(PAPER + ACCURACY_CLAIM)
    if mid:
        (folder / "tiny.mid.yaml").write_text((folder / "tiny.yaml").read_text())
    info = find_paper("tinypaper", root)
    return info, {c.id: c for c in info.spec.claims}


def _undecided(claim_id: str, reason: str, out_of_regime: bool = False) -> Verdict:
    return Verdict(claim_id, "relative_improvement", "INCONCLUSIVE", reason, out_of_regime=out_of_regime)


def test_too_few_seeds_names_the_confirmatory_seeds_that_decide(
    paper_root: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Never exploratory seeds (0-99 decide no confirmatory claim): the pre-registered ones when there are enough,
    else fresh ones registered first, above every seed registered before."""
    info, claims = _info(paper_root, mid=False)
    few = _undecided("fewer-bytes", "too few seeds: 1")
    step = next_steps.next_step(info, claims["fewer-bytes"], few)  # the scale was never registered
    assert step == (
        "next step: register 2 fresh seeds first (`distrepro preregister tinypaper --scale proxy --seeds 100-101`), "
        "then `distrepro reproduce tinypaper` (2 seeds decide it)"
    )
    record = paper_root / "preregistration" / "proxy.yaml"
    monkeypatch.setattr(next_steps, "registered_seeds", lambda paper_file, scale: ([300, 301, 302], record))
    step = next_steps.next_step(info, claims["fewer-bytes"], few)
    assert step == (
        "next step: `distrepro reproduce tinypaper` runs the 3 seeds pre-registered for it (2 seeds decide it)"
    )
    monkeypatch.setattr(next_steps, "registered_seeds", lambda paper_file, scale: ([300], record))
    step = next_steps.next_step(info, claims["fewer-bytes"], few)
    assert "`distrepro preregister tinypaper --scale proxy --seeds 301-302 --replace`" in step, step


def test_outside_the_regime_names_the_scale_that_meets_it(paper_root: Path) -> None:  # noqa: F811
    verdict = _undecided("as-accurate", "outside the paper's regime: saturated", out_of_regime=True)
    info, claims = _info(paper_root, mid=False)
    assert "no scale the paper ships" in next_steps.next_step(info, claims["as-accurate"], verdict, paper_root)
    info, claims = _info(paper_root, mid=True)  # the accuracy claim moves to mid once its arms have configs there
    step = next_steps.next_step(info, claims["as-accurate"], verdict, paper_root)
    assert "`distrepro reproduce tinypaper --scale mid` decides it" in step
    timing = _undecided("fewer-bytes", "outside the paper's regime: x", out_of_regime=True)
    assert "--scale mid" not in next_steps.next_step(info, claims["fewer-bytes"], timing, paper_root)  # bytes stay


def test_a_straddling_interval_names_fresh_registered_seeds(paper_root: Path) -> None:  # noqa: F811
    """The seeds that would decide a straddling interval are new ones (a confirmatory run never reuses a seed whose
    verdict it has seen), registered before they run."""
    info, claims = _info(paper_root, mid=False)
    verdict = _undecided("fewer-bytes", "the CI straddles the margin")
    verdict.n_seeds, verdict.seeds_needed = 3, 4
    verdict.per_seed = {"local": {100: 1.0, 101: 1.1, 102: 0.9}, "sync": {100: 1.2, 101: 1.0, 102: 1.1}}
    step = next_steps.next_step(info, claims["fewer-bytes"], verdict)
    assert "`distrepro preregister tinypaper --scale proxy --seeds 103-106 --replace`" in step, step
    assert "`distrepro reproduce tinypaper --seeds 103-106`" in step, step


def test_decided_verdicts_get_no_next_step(paper_root: Path) -> None:  # noqa: F811
    info, claims = _info(paper_root, mid=False)
    passed = Verdict("fewer-bytes", "relative_improvement", "PASS", "")
    assert next_steps.with_next_steps(info, claims.values(), [passed], paper_root) == [passed]


def test_seeds_below_a_claims_minimum_warn(paper_root: Path) -> None:  # noqa: F811
    info, _ = _info(paper_root, mid=False)
    lines = next_steps.seed_warnings(info, ["sync", "local"], "proxy", 1, paper_root)
    assert len(lines) == 2 and "cannot decide claim fewer-bytes (it needs 2: register 2 fresh seeds" in lines[0]
    assert next_steps.seed_warnings(info, ["sync", "local"], "proxy", 2, paper_root) == []
