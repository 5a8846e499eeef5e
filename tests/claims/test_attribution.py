"""What a verdict is evidence about (distrepro.claims.attribution) and how a unit that cannot hold is shown."""

from __future__ import annotations

from test_verdicts import spec as make_spec

from distrepro.claims.attribution import about, attribute, said
from distrepro.claims.shown import show
from distrepro.claims.verdicts import Verdict

SPEED = {"kind": "speedup", "arm": "fast", "claimed": 2.0}
ACC = {"kind": "final_metric", "arm": "fast", "metric": "val_accuracy", "direction": "max", "claimed": 0.9}


def test_a_timing_verdict_is_about_the_paper_only_when_covered_and_holding_at_every_corner() -> None:
    s = make_spec({**SPEED, "id": "t"})
    v = Verdict("t", "speedup", "FAIL", "")
    assert about(s.claims[0], v, s) == "emulation"  # no model check: nothing validated
    v.model_covered, v.model_holds = True, False
    assert about(s.claims[0], v, s) == "emulation"
    v.model_holds = True
    assert about(s.claims[0], v, s) == "paper"
    v.model_covered = False
    assert about(s.claims[0], v, s) == "emulation"


def test_an_accuracy_verdict_is_about_the_reimplementation_then_the_proxy() -> None:
    s = make_spec({**ACC, "id": "a"})
    v = Verdict("a", "final_metric", "FAIL", "")
    assert about(s.claims[0], v, s, checked=lambda m: False) == "reimplementation"
    assert about(s.claims[0], v, s, checked=lambda m: True) == "proxy"
    at_paper = s.claims[0].model_copy(update={"scale": "paper"})
    assert about(at_paper, v, s, checked=lambda m: True) == "paper"
    attribute(s, [v], checked=lambda m: False)
    assert v.about == "reimplementation" and said("FAIL", v.about).startswith("not reproduced by our re-implementation")


def test_the_shipped_reimplementations_name_their_reference_check() -> None:
    from distrepro.claims.attribution import method_checked

    assert method_checked("acid") and method_checked("decentdp")
    assert not method_checked("no-such-method")


def test_a_unit_whose_fails_miss_in_opposite_directions_is_inconsistent() -> None:
    s = make_spec({**SPEED, "id": "a"}, {**SPEED, "id": "b", "counts_with": "a"})
    vs = [Verdict("a", "speedup", "FAIL", ""), Verdict("b", "speedup", "FAIL", "")]
    vs[0].miss, vs[1].miss = "falls short of the claim", "exceeds the claim"
    for v in vs:
        v.about = "paper"
    shown = show(s, vs)
    assert {r.about for r in shown.rows} == {"inconsistent"}
    assert shown.of("a").said == "the paper's claims in this unit cannot all hold"
    assert shown.of("a").unit == ("a", "b")
    assert shown.tally.apart == {"inconsistent": {"PASS": 0, "FAIL": 1, "INCONCLUSIVE": 0}}
    assert shown.tally.text(shown.tally.of("headline"), "headline") == "0 PASS · 0 FAIL · 0 INCONCLUSIVE"
    assert "apart, not about the paper: 1 FAIL in units whose claims cannot all hold" in shown.summary()


def test_holm_says_why_m_differs_from_the_headline_claims() -> None:
    s = make_spec({**SPEED, "id": "a"}, {**SPEED, "id": "b", "same_as": "a"}, {**SPEED, "id": "c"})
    vs = [Verdict(i, "speedup", "PASS", "") for i in "abc"]
    for k, v in enumerate(vs):
        v.p_value = 0.001 * (k + 1)
    vs[2].depends_on = "the bandwidth"
    t = show(s, vs).tally
    assert t.holm_m == 1
    assert "over the 1 headline claims (3 headline claims, less 1 counted inside another claim's unit" in t.holm_text()
    assert "and 1 unit that depends on an assumption)" in t.holm_text()
