"""The headline tally counts evidence about the paper: once per claim, apart when an assumption decides, Holm."""

from __future__ import annotations

from typing import Any

import pytest
from test_verdicts import SRC, spec

from distrepro.claims.schema import validate_paper
from distrepro.claims.tally import holm, mark_dependence, tally, units
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
    assert t.fails["headline"] == {"falls short": 0, "exceeds": 1}
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
