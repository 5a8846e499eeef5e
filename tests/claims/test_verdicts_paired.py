"""Issue 13: seeds paired across arms, enough seeds, and tallies that count evidence, not rows.

Synthetic run tables only (no training): each test builds the per-seed values by hand.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_verdicts import SRC, Table, judge, spec

from distrepro.claims.evidence import group_of
from distrepro.claims.schema import validate_paper
from distrepro.claims.tally import tally
from distrepro.claims.verdicts import Verdict

SHARED = {0: 10.0, 1: 50.0, 2: 30.0, 3: 70.0, 4: 20.0}  # what a seed gives every arm: init, data order


def test_five_seeds_by_default_and_the_reason_names_the_count() -> None:
    t = Table()
    t.arm("base", "final/val_accuracy", {0: 0.50, 1: 0.52, 2: 0.51})
    t.arm("fast", "final/val_accuracy", {0: 0.60, 1: 0.61, 2: 0.62})
    claim = {
        "id": "n", "kind": "non_inferiority", "arm": "fast", "metric": "final/val_accuracy", "direction": "max",
        "margin": 0.01, "source": SRC, "evidence": "reconstructed",
    }  # fmt: skip
    data = {"kind": "reproduction", "citation": {"id": "handpaper", "title": "H"}, "claims": [claim]}
    data["setup"] = {"profile": "hetero-2fast-2slow", "baseline": "base"}  # no min_seeds: the default
    v = judge(validate_paper(data), t)
    assert v.verdict == "INCONCLUSIVE"
    assert v.reason == "too few seeds: 3 with both 'fast' and 'base' finished (seeds [0, 1, 2]), 5 required"


def _shared_arms(gap: float) -> Table:
    """Two arms whose per-seed values share a large seed effect; 'a' is ``gap`` above 'b' per seed."""
    t = Table()
    wiggle = {0: 0.01, 1: -0.02, 2: 0.0, 3: 0.02, 4: -0.01}
    t.arm("a", "final/val_accuracy", {s: v + gap + wiggle[s] for s, v in SHARED.items()})
    t.arm("b", "final/val_accuracy", dict(SHARED))
    return t


ORDER = {"id": "o", "kind": "ordering", "arms": ["a", "b"], "metric": "final/val_accuracy", "direction": "max"}


def test_ordering_is_paired_by_seed_so_a_shared_seed_effect_cancels() -> None:
    # per-seed gaps 1.01, 0.98, 1.0, 1.02, 0.99: mean 1.0, t-CI ±0.0196, symmetric (G1 = 0) so the skew guard
    # widens both ends ×3.65 at n = 5 (distrepro.claims.intervals): ±0.0717 → PASS; unpaired, the seed
    # effect (sd ≈ 24) swamps a gap of 1 and the interval straddles 0
    paired = judge(spec(ORDER), _shared_arms(1.0))
    assert paired.verdict == "PASS" and paired.paired and paired.ci_method == "t"
    assert paired.statistic == pytest.approx(1.0) and paired.ci == pytest.approx((0.92834, 1.07166), rel=1e-4)
    assert paired.points == pytest.approx({0: 1.01, 1: 0.98, 2: 1.0, 3: 1.02, 4: 0.99})
    assert paired.skew_note.startswith("skew guard: per-seed values not measurably skewed away from the lower and")
    assert "paired by seed" in paired.statistic_name
    unpaired = judge(spec({**ORDER, "accept": {"paired": False}}), _shared_arms(1.0))
    assert unpaired.verdict == "INCONCLUSIVE" and not unpaired.paired and unpaired.ci_method == "bca"
    assert "straddles the margin 0" in unpaired.reason and "more seeds could decide" in unpaired.reason


def test_ordering_of_three_arms_takes_the_weakest_adjacent_gap() -> None:
    t = _shared_arms(1.0)
    t.arm("c", "final/val_accuracy", {s: v - 0.1 for s, v in SHARED.items()})  # 0.1 below b, every seed
    v = judge(spec({**ORDER, "arms": ["a", "b", "c"]}), t)
    assert v.statistic == pytest.approx(0.1) and v.ci == pytest.approx((0.1, 0.1))  # the b–c gap, no spread
    assert v.verdict == "PASS"
    reversed_ = judge(spec({**ORDER, "arms": ["a", "c", "b"]}), t)
    assert reversed_.verdict == "FAIL" and reversed_.statistic == pytest.approx(-0.1)


def test_paired_comparisons_say_so() -> None:
    t = _shared_arms(1.0)
    claim = {
        "id": "r", "kind": "relative_improvement", "arm": "a", "baseline": "b", "metric": "final/val_accuracy",
        "direction": "max", "form": "difference", "claimed": 0.05, "accept": {"abs_tolerance": 1.0},
    }  # fmt: skip
    v = judge(spec(claim), t)
    assert v.paired and v.statistic_name == "mean of per-seed values (paired by seed)"
    assert v.to_dict()["paired"] is True


# ------------------------------------------------------------------ evidence groups and the headline tally


def _tagged() -> Any:
    base = {"kind": "final_metric", "arm": "a", "metric": "final/val_accuracy", "direction": "max", "claimed": 1.0}
    claims = [
        {**base, "id": "p1", "evidence": "verbatim"},
        {**base, "id": "p2", "evidence": "figure", "origin": "paper"},
        {**base, "id": "d1", "evidence": "derived"},
        {**base, "id": "r1", "evidence": "verbatim", "origin": "reconstructed"},
        {**base, "id": "s1", "evidence": "verbatim", "decided_by": "model_structure", "why": "ties by construction"},
    ]
    return spec(*claims)


def test_only_the_papers_own_measured_claims_are_the_headline() -> None:
    s = _tagged()
    assert [group_of(c) for c in s.claims] == ["headline", "headline", "derived", "derived", "structural"]
    outcomes = ["PASS", "FAIL", "PASS", "PASS", "FAIL"]
    verdicts = [Verdict(c.id, c.kind, v, "") for c, v in zip(s.claims, outcomes, strict=True)]
    t = tally(s.claims, verdicts)
    assert t.of("headline") == {"PASS": 1, "FAIL": 1, "INCONCLUSIVE": 0}
    assert t.all_claims() == {"PASS": 3, "FAIL": 2, "INCONCLUSIVE": 0}
    assert t.summary() == (  # hand-made verdicts carry no p-value: none can stand after Holm
        "1 PASS · 1 FAIL (1 falls short, 0 exceed) · 0 INCONCLUSIVE of the paper's 2 claims; 0 stand after Holm "
        "(also judged: derived/reconstructed 2 PASS · 0 FAIL · 0 INCONCLUSIVE; decided by the model's structure "
        "0 PASS · 1 FAIL (1 falls short, 0 exceed) · 0 INCONCLUSIVE)"
    )
