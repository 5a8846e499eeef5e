"""The sentences a report prints about a verdict say only what the runs support.

Hand-built run tables judged by the real rule; each test pins one wording a reviewer flagged: "nothing
measured" beside listed per-seed values, "same initial model" for arms on different profiles, "number
verbatim" for a claim without a number, "exceeds the claim" for a claimed tie, "profile `any`", and
"more seeds could decide" without saying how many.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[1] / "claims"))

from test_verdicts import SRC, Table, judge, spec

from distrepro.claims.schema import validate_paper
from distrepro.report.claims_sections import evidence_text, tally_text
from distrepro.report.headline import claim_sentence

ACC = "final/val_accuracy"
GAIN = {
    "id": "g", "kind": "relative_improvement", "arm": "fast", "metric": ACC, "direction": "max", "form": "difference",
    "claimed": 0.01, "accept": {"sided": "one_sided"},
}  # fmt: skip


def _two_arms(gap: float, seeds: int = 5, **profiles: str) -> Table:
    t = Table()
    wiggle = [0.002, -0.001, 0.0, 0.001, -0.002, 0.0015, -0.0015, 0.0005, -0.0005, 0.0]
    for s in range(seeds):
        t.add("base", s, profile=profiles.get("base", "hetero-2fast-2slow"), **{ACC: 0.7 + 0.01 * s})
        t.add("fast", s, profile=profiles.get("fast", "hetero-2fast-2slow"), **{ACC: 0.7 + 0.01 * s + gap + wiggle[s]})
    return t


def test_too_few_seeds_says_how_many_were_measured_not_nothing() -> None:
    s = spec({**GAIN, "accept": {"sided": "one_sided", "min_seeds": 5}})
    v = judge(s, _two_arms(0.02, seeds=3))
    assert v.verdict == "INCONCLUSIVE" and v.per_seed["fast"]
    text = claim_sentence(s.claims[0], v)
    assert "nothing measured" not in text
    assert "3 seeds measured, fewer than the 5 the claim needs (per-seed values in the claim details)" in text


def test_same_initial_model_only_for_arms_on_one_profile() -> None:
    data: dict[str, Any] = {
        "kind": "reproduction", "citation": {"id": "handpaper", "title": "H"},
        "setup": {"baseline": "base", "min_seeds": 3}, "claims": [{**GAIN, "source": SRC, "evidence": "verbatim"}],
    }  # fmt: skip
    s = validate_paper(data)  # no profile: each arm is read where it ran
    across = judge(s, _two_arms(0.02, fast="hetero-2fast-2slow", base="homog-4"))
    assert across.across_profiles and "not the same initial model" in across.statistic_name
    text = tally_text(s, [across])
    assert "g compare arms on different profiles" in text and "not the same initial model" in text
    assert "profile `any`" not in text and "profile `any`" not in claim_sentence(s.claims[0], across)
    assert "on profiles `hetero-2fast-2slow`, `homog-4`" in claim_sentence(s.claims[0], across)
    same = judge(spec(GAIN), _two_arms(0.02))
    assert not same.across_profiles
    assert "same initial model and data order)" in tally_text(spec(GAIN), [same])


def test_number_verbatim_only_where_the_paper_gives_a_number() -> None:
    order = {"id": "o", "kind": "ordering", "arms": ["fast", "base"], "metric": ACC, "direction": "max"}
    s = spec({**order, "evidence": "verbatim", "origin": "paper"}, {**GAIN, "id": "n", "origin": "paper"})
    assert evidence_text(s.claims[0]) == "paper (statement verbatim)"
    assert evidence_text(s.claims[1]) == "paper (number verbatim)"


def test_a_claimed_tie_is_contradicted_never_exceeded() -> None:
    tie = {**GAIN, "id": "tie", "claimed": 0.0, "accept": {"abs_tolerance": 0.005}}  # "no loss in accuracy"
    v = judge(spec(tie), _two_arms(0.05))
    assert v.verdict == "FAIL" and "exceeds" not in v.reason and "exceeds" not in v.miss
    assert v.miss == "departs from the claimed tie (the arm is better)"
    worse = judge(spec(tie), _two_arms(-0.05))
    assert worse.miss == "departs from the claimed tie (the arm is worse)"
    beyond = judge(spec({**GAIN, "claimed": [0.0, 0.01], "accept": {}}), _two_arms(0.05))
    assert beyond.miss == "exceeds the claim"  # a claimed gain of 0-1 points, far beaten: in the paper's favour


def test_more_seeds_could_decide_says_how_many() -> None:
    noisy = Table()
    for s, d in enumerate([0.03, -0.01, 0.02, 0.0, 0.01]):
        noisy.add("base", s, **{ACC: 0.7})
        noisy.add("fast", s, **{ACC: 0.7 + d})
    v = judge(spec(GAIN), noisy)  # mean 0.01 (to rounding) on the edge: no planned number of seeds decides
    assert v.verdict == "INCONCLUSIVE" and "more seeds could decide only past 100000 seeds" in v.reason
    for s, d in enumerate([0.03, 0.0, 0.02, 0.01, 0.02]):
        noisy.add("fast", s, **{ACC: 0.7 + d})  # newer runs replace the older: mean 0.016, s 0.0114
    v = judge(spec(GAIN), noisy)
    assert v.verdict == "INCONCLUSIVE" and v.seeds_needed is not None and v.seeds_needed > 5
    assert f"more seeds could decide: about {v.seeds_needed} seeds in a new run" in v.reason
    assert "(n ≈ (t·s/d)²" in v.reason


def test_a_verdict_that_depends_on_an_assumption_wears_no_pass_or_fail_badge() -> None:
    s = spec(GAIN)
    v = judge(s, _two_arms(0.02))
    assert v.verdict == "PASS"
    v.depends_on, v.pass_share = "network.inter_node.bandwidth_gbytes_per_s", 0.4
    text = claim_sentence(s.claims[0], v)
    assert text.startswith("**DEPENDS** · depends on an assumption (PASS on the declared hardware): ")
    assert "**PASS**" not in text
    assert "depends on network.inter_node.bandwidth_gbytes_per_s (PASS in 40% of the plausible hardware" in text


def test_paired_by_seed_only_when_seeds_pair() -> None:
    unpaired = spec({**GAIN, "accept": {"sided": "one_sided", "paired": False}})  # BCa: allowed at 10 seeds
    v = judge(unpaired, _two_arms(0.02, seeds=10))
    assert not v.paired
    text = tally_text(unpaired, [v])
    assert "paired by seed" not in text and "same initial model" not in text
    assert "No verdict here pairs seeds" in text


def test_the_headline_names_the_scale_that_decided_it() -> None:
    """A report of every scale judges a headline claim at the scale that decided it (its ``scale`` moved there):
    the tally says that scale, not the paper's default one."""
    s = spec({**GAIN, "origin": "paper"})
    v = judge(s, _two_arms(0.02))
    assert "scale `proxy`)" in tally_text(s, [v])
    at_mid = s.model_copy(update={"claims": [s.claims[0].model_copy(update={"scale": "mid"})]})
    text = tally_text(at_mid, [v])
    assert "scale `mid`)" in text and "`proxy`" not in text
