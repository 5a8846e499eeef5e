"""``api.MethodPlan``: the typed plan a method returns, and its JSON in ``distrepro plan``."""

from __future__ import annotations

import pytest

from distrepro import api


def test_a_plan_serialises_its_facts_then_its_typed_fields() -> None:
    plan = api.MethodPlan(
        transfers=(api.Transfer("all_reduce", 400.0, per="round"), api.Transfer("gossip_pair", 8.0, count=2.0)),
        round_lengths=(3, 3, 1),
        facts={"period": 3},
    )
    out = plan.to_json()
    assert out["period"] == 3 and out["rounds"] == 3 == plan.rounds and out["round_lengths"] == [3, 3, 1]
    assert out["transfers"][0] == {
        "pattern": "all_reduce",
        "bytes": 400.0,
        "count": 1.0,
        "per": "round",
        "participants": "world",
        "overlaps_compute": False,
    }
    assert out["transfers"][1]["participants"] == "pair"  # a swap is always between two ranks


def test_a_fact_named_like_a_typed_field_and_a_bad_transfer_are_refused() -> None:
    with pytest.raises(ValueError, match=r"\['round_lengths'\] are typed fields"):
        api.MethodPlan(facts={"round_lengths": "later"}).to_json()
    with pytest.raises(ValueError, match="'allreduce' is not one of all_reduce"):
        api.Transfer("allreduce", 1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="bytes and count must be >= 0"):
        api.Transfer("broadcast", -1.0)


def test_a_parameter_shape_counts_its_elements_and_bytes() -> None:
    weight = api.ParamShape("fc.weight", (10, 4, 3), 4)
    assert (weight.numel, weight.nbytes) == (120, 480)
    assert api.ParamShape("scalar", (), 2).numel == 1
