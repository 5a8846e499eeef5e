"""A measured claim is never judged by a point statistic or a bootstrap interval of fewer than 10 seeds.

Below 10 seeds a point says nothing about the next seeds, and a percentile/BCa interval of a handful of values
cannot reach outside them (it under-covers); the verdict is INCONCLUSIVE and says how to judge the claim instead.
A claim decided by the model's structure is deterministic, so its arithmetic may be checked on fewer seeds.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from test_verdicts import SRC, Table, judge

from distrepro.claims.acceptance import MIN_SEEDS_POINT_OR_BOOTSTRAP, refused_below
from distrepro.claims.schema import validate_paper

ACC = "final/val_accuracy"
GAIN = {
    "id": "g", "kind": "relative_improvement", "arm": "fast", "metric": ACC, "direction": "max", "form": "difference",
    "claimed": 0.01, "accept": {"sided": "one_sided"}, "source": SRC, "evidence": "verbatim",
}  # fmt: skip


def _spec(accept: dict[str, Any], **claim: Any) -> Any:
    data = {
        "kind": "reproduction", "citation": {"id": "handpaper", "title": "H"},
        "setup": {"profile": "hetero-2fast-2slow", "baseline": "base", "min_seeds": 3},
        "claims": [{**GAIN, "accept": {"sided": "one_sided", **accept}, **claim}],
    }  # fmt: skip
    return validate_paper(data)


def _table(seeds: int) -> Table:
    t = Table()
    for s in range(seeds):
        t.add("base", s, **{ACC: 0.70 + 0.01 * s})
        t.add("fast", s, **{ACC: 0.75 + 0.01 * s + 0.001 * (s % 3)})
    return t


@pytest.mark.parametrize(
    ("accept", "what"),
    [
        ({"rule": "point"}, "rule: point"),
        ({"ci_method": "bca"}, "a bca bootstrap interval"),
        ({"ci_method": "percentile"}, "a percentile bootstrap interval"),
        ({"paired": False}, "a bca bootstrap interval"),  # unpaired: BCa by default
    ],
)
def test_a_point_or_bootstrap_rule_is_refused_below_ten_seeds(accept: dict[str, Any], what: str) -> None:
    s = _spec(accept)
    for n in (3, 5, MIN_SEEDS_POINT_OR_BOOTSTRAP - 1):
        v = judge(s, _table(n))
        assert v.verdict == "INCONCLUSIVE" and what in v.reason, v.reason
        assert f"refused below {MIN_SEEDS_POINT_OR_BOOTSTRAP} seeds for a measured claim (n={n})" in v.reason
    decided = judge(s, _table(MIN_SEEDS_POINT_OR_BOOTSTRAP))  # a gain of 5 points against a claimed 1: decided
    assert decided.verdict == "PASS", decided.reason


def test_a_t_interval_on_paired_seeds_is_never_refused() -> None:
    s = _spec({})
    assert s.claims[0].accept.ci_method == "t" and refused_below(s.claims[0], 3) is None
    assert judge(s, _table(3)).verdict == "PASS"


def test_a_structural_claim_may_be_checked_on_few_seeds() -> None:
    why = "hand-built values: tests the rule's arithmetic"
    s = _spec({"rule": "point"}, decided_by="model_structure", why=why)
    assert refused_below(s.claims[0], 3) is None and judge(s, _table(3)).verdict == "PASS"
