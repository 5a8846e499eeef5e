"""Links resolved by class give, pair for pair, what the pair-by-pair rule gave; the first pairs are a full scan's."""

from __future__ import annotations

from itertools import combinations

import pytest
from link_reference import make_link, mixed_profile, reference_first_pairs, reference_link

from distrepro.hardware.link_classes import LinkClasses
from distrepro.hardware.profiles import HardwareProfile, list_profiles, load_profile

pytestmark = pytest.mark.smoke


def profiles() -> list[HardwareProfile]:
    shipped = [load_profile(name) for name in list_profiles()]
    return [mixed_profile(), *(p for p in shipped if p.world_size <= 64)]


@pytest.mark.parametrize("profile", profiles(), ids=lambda p: p.name)
def test_every_pair_resolves_bit_for_bit_as_the_pair_rule(profile: HardwareProfile) -> None:
    for a, b in combinations(range(profile.world_size), 2):
        expected = reference_link(profile, a, b)
        assert profile.link(a, b) == expected, (a, b)
        assert profile.link(b, a) == expected, (b, a)


@pytest.mark.parametrize("profile", profiles(), ids=lambda p: p.name)
def test_first_pairs_are_what_a_scan_of_every_pair_meets_first(profile: HardwareProfile) -> None:
    assert profile.link_classes().first_pairs() == reference_first_pairs(profile)


def test_mixed_profile_has_several_classes_and_few_signatures() -> None:
    classes = mixed_profile().link_classes()
    assert len(classes.first_pairs()) >= 6  # the test covers more than one class of each kind
    # per distinct capped figure, not per rank: within nodes plain, c, d.g, e; across nodes plain (= d.g, whose NIC
    # is faster than inter_node), b, c, e
    assert len(classes.signatures[0]) == 4 and len(classes.signatures[1]) == 4


def test_first_pair_within_a_node_skips_nodes_without_a_match() -> None:
    """Device ``h`` is alone with its signature on nodes 0 and 1 and twice on node 2: the first (h, h) pair within
    a node is on node 2, past two nodes where the search finds none."""
    base = HardwareProfile.model_validate(
        {
            "schema_version": 1,
            "name": "skip",
            "description": "test",
            "nodes": [
                {
                    "name": f"n{i}",
                    "devices": [
                        {
                            "name": "g",
                            "kind": "gpu",
                            "count": 1,
                            "memory_gib": 1,
                            "source": "[E] t",
                            "nic": make_link(9, 1),
                        },
                        {"name": "h", "kind": "gpu", "count": 1 + (i == 2), "memory_gib": 1, "source": "[E] t"},
                    ],
                }
                for i in range(3)
            ],
            "network": {"intra_node": make_link(10, 10), "inter_node": make_link(50, 2)},
        }
    )
    firsts = base.link_classes().first_pairs()
    assert firsts == reference_first_pairs(base)
    assert (5, 6) in [pair for pair, _ in firsts]
    classes = LinkClasses(
        [0, 0, 1, 1], [(None,)] * 4, [(None,)] * 4, base.network.intra_node, base.network.inter_node, 0.0
    )
    assert [pair for pair, _ in classes.first_pairs()] == [(0, 1), (0, 2)]


def test_link_classes_of_ten_thousand_ranks_are_few_and_built_once() -> None:
    """A 10,000-device profile resolves its links without a pair table: one class within nodes, one across."""
    gpu = {"name": "g", "kind": "gpu", "count": 8, "memory_gib": 24, "source": "[E] test"}
    profile = HardwareProfile.model_validate(
        {
            "schema_version": 2,
            "name": "big",
            "description": "test",
            "nodes": [{"name": "n", "count": 1250, "devices": [gpu]}],
            "network": {"intra_node": make_link(10, 10), "inter_node": make_link(50, 2)},
        }
    )
    assert profile.world_size == 10_000
    firsts = profile.link_classes().first_pairs()
    assert [pair for pair, _ in firsts] == [(0, 1), (0, 8)]
    assert profile.link(9_998, 9_999) is profile.link(0, 1)
    assert profile.link(0, 9_999) == reference_link(profile, 0, 9_999)
    assert profile.link_classes() is profile.link_classes()
