"""The headline tally counts evidence about the paper: once per claim, apart when an assumption decides, Holm."""

from __future__ import annotations

from typing import Any

import pytest
from test_verdicts import SRC, spec

from distrepro.claims.schema import validate_paper
from distrepro.claims.tally import (
    combine,
    holm,
    mark_dependence,
    miss_of_unit,
    tally,
    unit_shares,
    units,
    verdict_of_unit,
)
from distrepro.claims.verdicts import Verdict
from distrepro.errors import ConfigError

SPEED = {"kind": "speedup", "arm": "fast", "claimed": 2.0}


def _v(cid: str, verdict: str, p: float | None = None, miss: str = "") -> Verdict:
    v = Verdict(cid, "speedup", verdict, "")  # type: ignore[arg-type]
    v.p_value, v.miss = p, miss
    return v


def test_an_inconsistent_pair_and_a_duplicate_count_once() -> None:
    s = spec(
        {**SPEED, "id": "time"}, {**SPEED, "id": "flops", "counts_with": "time"},
        {**SPEED, "id": "F6"}, {**SPEED, "id": "F7", "same_as": "F6"}, {**SPEED, "id": "solo"},
    )  # fmt: skip
    assert units(s.claims) == [["time", "flops"], ["F6", "F7"], ["solo"]]
    verdicts = [
        _v("time", "FAIL", 0.001, "falls short of the claim"),
        _v("flops", "PASS", 0.001),
        _v("F6", "FAIL", 0.001, "exceeds the claim"),
        _v("F7", "FAIL", 0.002, "exceeds the claim"),
        _v("solo", "INCONCLUSIVE"),
    ]
    t = tally(s.claims, verdicts)
    assert t.of("headline") == {"PASS": 1, "FAIL": 1, "INCONCLUSIVE": 1} and t.merged == 2
    assert t.fails["headline"] == {"falls short": 0, "exceeds": 1, "inconsistent": 0}
    assert t.text(t.of("headline"), "headline") == "1 PASS · 1 FAIL (0 fall short, 1 exceeds) · 1 INCONCLUSIVE"


def test_a_link_to_an_unknown_claim_names_the_field() -> None:
    data: dict[str, Any] = {
        "kind": "reproduction", "citation": {"id": "x", "title": "X"}, "setup": {"baseline": "base"},
        "claims": [{**SPEED, "id": "a", "same_as": "nope", "source": SRC, "evidence": "verbatim"}],
    }  # fmt: skip
    with pytest.raises(ConfigError, match=r"claims\[0\]\.same_as.*no other claim with id 'nope'"):
        validate_paper(data)


def test_a_verdict_that_flips_over_the_plausible_hardware_is_counted_apart() -> None:
    s = spec({**SPEED, "id": "a"}, {**SPEED, "id": "b"}, {**SPEED, "id": "c"})
    verdicts = [_v("a", "PASS", 0.001), _v("b", "FAIL", 0.001, "falls short of the claim"), _v("c", "PASS", 0.001)]
    mark_dependence(verdicts, {"a": (0.38, "link bandwidth"), "b": (0.03, "link bandwidth"), "c": (0.96, "")})
    assert verdicts[0].depends_on == "link bandwidth" and verdicts[0].pass_share == 0.38
    assert not verdicts[1].depends_on and not verdicts[2].depends_on  # 3 % and 96 %: firm
    t = tally(s.claims, verdicts)
    assert t.of("headline") == {"PASS": 1, "FAIL": 1, "INCONCLUSIVE": 0} and t.depends == {"headline": 1}
    assert t.total("headline") == 3 and "1 depends on an assumption" in t.text(t.of("headline"), "headline")
    assert t.holm_m == 2  # a verdict that depends on an assumption is not a headline test


def test_holm_step_down() -> None:
    # m = 4 at 2.5 %: thresholds 0.00625, 0.00833, 0.0125, 0.025 for the sorted p-values
    s = spec(*({**SPEED, "id": i} for i in "abcd"))
    verdicts = [
        _v("a", "PASS", 0.001),
        _v("b", "PASS", 0.008),
        _v("c", "FAIL", 0.02, "falls short"),
        _v("d", "PASS", 0.02),
    ]
    t = tally(s.claims, verdicts)
    assert t.holm_m == 4 and t.holm_stands == 2
    assert [v.holm for v in verdicts] == ["stands", "stands", "not after Holm", "not after Holm"]
    assert "2 of the 4 decided stand(s) after Holm's step-down over the 4 headline claims" in t.holm_text()
    assert holm([], 3) == []


# ------------------------------------------------------------------ merged units over the plausible hardware

#: C-ADP's pair: the time cut (A-C2) and the FLOPS ratio (A-C4), one the reciprocal of the other's complement
PAIR = ({**SPEED, "id": "A-C2"}, {**SPEED, "id": "A-C4", "counts_with": "A-C2"})
SHORT, OVER = "falls short of the claim", "exceeds the claim"


def _one_pass(at: int, n: int = 32) -> list[str]:
    return ["PASS" if k == at else "FAIL" for k in range(n)]


def test_a_merged_unit_is_judged_as_one_in_every_hardware_setting() -> None:
    # each member PASSes in 1 of 32 settings (3 %: firm alone), in different ones: the unit holds in 2/32 = 6.25 %
    s = spec(*PAIR)
    verdicts = [_v("A-C2", "FAIL", 0.001, SHORT), _v("A-C4", "FAIL", 0.001, OVER)]
    settings = {"A-C2": _one_pass(3), "A-C4": _one_pass(17)}
    shares = {"A-C2": (1 / 32, "link bandwidth"), "A-C4": (1 / 32, "link bandwidth")}
    assert unit_shares(s.claims, verdicts, settings) == {"A-C2": (2 / 32, ["A-C4"]), "A-C4": (2 / 32, ["A-C2"])}
    mark_dependence(verdicts, shares, settings, s.claims)
    for v, other in zip(verdicts, ("A-C4", "A-C2"), strict=True):
        assert v.pass_share == 1 / 32 and v.unit_pass_share == 2 / 32 and v.unit_with == [other]
        assert v.depends_on == "link bandwidth"  # the unit's share decides, for every member
    t = tally(s.claims, verdicts)
    assert t.depends == {"headline": 1} and t.of("headline")["FAIL"] == 0 and t.total("headline") == 1
    assert t.holm_m == 0  # not a firm FAIL: no headline test


def test_member_by_member_the_same_pair_was_a_firm_fail() -> None:
    # the old reading (no per-setting verdicts): 3 % each, both firm, one FAIL unit, whose members miss both ways
    s = spec(*PAIR)
    verdicts = [_v("A-C2", "FAIL", 0.001, SHORT), _v("A-C4", "FAIL", 0.001, OVER)]
    mark_dependence(verdicts, {"A-C2": (1 / 32, "link bandwidth"), "A-C4": (1 / 32, "link bandwidth")})
    assert not any(v.depends_on for v in verdicts) and all(v.unit_pass_share is None for v in verdicts)
    t = tally(s.claims, verdicts)
    # firm, and counted once: beside the headline, as evidence about an inconsistent unit, not about the paper
    assert t.of("headline")["FAIL"] == 0 and t.apart == {"inconsistent": {"PASS": 0, "FAIL": 1, "INCONCLUSIVE": 0}}
    assert [v.about for v in verdicts] == ["inconsistent", "inconsistent"]


def test_members_passing_in_the_same_setting_leave_the_unit_firm() -> None:
    s = spec(*PAIR)
    verdicts = [_v("A-C2", "FAIL", 0.001, SHORT), _v("A-C4", "FAIL", 0.001, OVER)]
    mark_dependence(
        verdicts,
        {"A-C2": (1 / 32, "bw"), "A-C4": (1 / 32, "bw")},
        {"A-C2": _one_pass(5), "A-C4": _one_pass(5)},
        s.claims,
    )
    assert [v.unit_pass_share for v in verdicts] == [1 / 32, 1 / 32] and not any(v.depends_on for v in verdicts)


def test_a_member_not_swept_keeps_its_verdict_in_every_setting() -> None:
    # A-C4 is not re-timed: its reported PASS holds in every setting, so the unit holds in all 32 (firm)
    s = spec(*PAIR)
    verdicts = [_v("A-C2", "FAIL", 0.001, SHORT), _v("A-C4", "PASS", 0.001)]
    mark_dependence(verdicts, {"A-C2": (0.5, "bw")}, {"A-C2": _one_pass(0)[:2]}, s.claims)
    assert verdicts[0].pass_share == 0.5 and verdicts[0].unit_pass_share == 1.0 and not verdicts[0].depends_on
    assert verdicts[1].pass_share is None and verdicts[1].unit_pass_share == 1.0
    # the other way round: a constant FAIL partner, the swept member PASSes in 1 of 2 settings: the unit depends
    verdicts = [_v("A-C2", "PASS", 0.001), _v("A-C4", "FAIL", 0.001, OVER)]
    mark_dependence(verdicts, {"A-C2": (0.5, "bw")}, {"A-C2": _one_pass(0)[:2]}, s.claims)
    assert [v.depends_on for v in verdicts] == ["bw", "bw"] and verdicts[1].unit_pass_share == 0.5
    with pytest.raises(ValueError, match="different numbers of settings"):
        unit_shares(s.claims, verdicts, {"A-C2": ["PASS"], "A-C4": ["PASS", "FAIL"]})


def test_members_missing_in_opposite_directions_make_an_inconsistent_unit() -> None:
    s = spec(*PAIR, {**SPEED, "id": "F6"}, {**SPEED, "id": "F7", "same_as": "F6"})
    verdicts = [
        _v("A-C2", "FAIL", 0.001, SHORT),
        _v("A-C4", "FAIL", 0.001, OVER),
        _v("F6", "FAIL", 0.001, SHORT),
        _v("F7", "FAIL", 0.002, "departs from the claimed tie (the arm is better)"),  # a tie: counts as short
    ]
    assert miss_of_unit(verdicts[:2]) == "inconsistent" and miss_of_unit(verdicts[2:]) == "falls short"
    assert miss_of_unit([verdicts[1]]) == "exceeds"
    t = tally(s.claims, verdicts)
    # the inconsistent unit is evidence about the paper's claims contradicting each other, not about its result: it
    # is tallied beside the headline, which counts the F6/F7 unit once
    assert t.fails["headline"] == {"falls short": 1, "exceeds": 0, "inconsistent": 0}
    assert t.apart == {"inconsistent": {"PASS": 0, "FAIL": 1, "INCONCLUSIVE": 0}}
    assert t.text(t.of("headline"), "headline") == "0 PASS · 1 FAIL (1 falls short, 0 exceed) · 0 INCONCLUSIVE"
    from distrepro.report.headline import first_screen  # the report's first sentence words it the same way

    assert "1 in units whose claims cannot all hold (1 FAIL)" in first_screen(s, verdicts)


@pytest.mark.parametrize("a", ["PASS", "FAIL", "INCONCLUSIVE"])
@pytest.mark.parametrize("b", ["PASS", "FAIL", "INCONCLUSIVE"])
def test_a_setting_combines_its_members_as_the_report_does(a: str, b: str) -> None:
    members = [_v("x", a, 0.01, SHORT), _v("y", b, 0.01, OVER)]
    assert verdict_of_unit([a, b]) == combine(["x", "y"], "headline", members).verdict


def test_a_fail_the_hardware_check_could_not_re_time_is_never_firm() -> None:
    fail, passed, kept = _v("a", "FAIL"), _v("b", "PASS"), _v("c", "FAIL")
    mark_dependence([fail, passed, kept], {"c": (0.0, "bw")}, not_retimed={"a": "asynchronous arm", "b": "idem"})
    assert fail.depends_on == "hardware figures the check could not vary (not re-timed: asynchronous arm)"
    assert passed.depends_on == ""  # a PASS keeps its verdict; only a FAIL would count against the paper
    assert kept.depends_on == "" and kept.pass_share == 0.0  # swept, firm at a share of 0
