"""The ``nodes:`` list as written: ``count`` expanded into named nodes, the world bounded before any copy."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from distrepro.hardware.node_list import check_unique_node_names, expand_node_counts
from distrepro.hardware.profile_parts import MAX_RANKS


@pytest.mark.smoke
def test_a_count_names_its_copies_and_leaves_other_entries_alone() -> None:
    nodes = [{"name": "head", "devices": [{"count": 1}]}, {"count": 3, "name": "box", "devices": [{"count": 2}]}]
    out = expand_node_counts(nodes)
    assert [n["name"] for n in out] == ["head", "box0", "box1", "box2"]
    assert all("count" not in n for n in out[1:]) and out[0] is nodes[0]
    assert expand_node_counts([{"count": 1, "name": "solo"}])[0]["name"] == "solo"  # one copy keeps its name
    assert expand_node_counts("not a list") == "not a list"  # left to the schema, which names it


def test_a_count_past_the_rank_limit_is_refused_before_copying() -> None:
    with pytest.raises(ValueError, match=r"nodes\[1\]\.count: .* more than the"):
        expand_node_counts([{"devices": [{"count": 4}]}, {"count": MAX_RANKS, "devices": [{"count": 1}]}])
    with pytest.raises(ValueError, match="whole number >= 1"):
        expand_node_counts([{"count": True, "name": "b"}])


def test_repeated_node_names_are_named() -> None:
    nodes = [SimpleNamespace(name=n) for n in ("a", "b", "a", "c", "b")]
    with pytest.raises(ValueError, match=r"\['a', 'b'\]"):
        check_unique_node_names(nodes)
    assert check_unique_node_names(nodes[:2]) == nodes[:2]
