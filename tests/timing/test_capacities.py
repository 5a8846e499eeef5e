"""Path capacities looked up when asked hold, key for key, what the table built up front held."""

from __future__ import annotations

import pytest
from link_reference import make_link, mixed_profile

from distrepro.hardware.profiles import HardwareProfile, list_profiles, load_profile
from distrepro.timing.capacities import PathCapacities
from distrepro.timing.network import FlowNetwork, Paths

pytestmark = pytest.mark.smoke


def reference_table(profile: HardwareProfile) -> dict[object, float]:
    """``Paths.capacity`` before it was lazy, transcribed: both NIC directions of every node, then every ordered
    pair of ranks on one node."""
    table: dict[object, float] = {}
    inter = profile.network.inter_node.bandwidth_gbytes_per_s
    for i in range(len(profile.nodes)):
        nic = profile.node_nic(i)
        bw = (nic.bandwidth_gbytes_per_s if nic is not None else inter) * 1e9
        table[("tx", i)] = bw
        table[("rx", i)] = bw
    by_node: dict[int, list[int]] = {}
    for r in range(profile.world_size):
        by_node.setdefault(profile.node_index(r), []).append(r)
    for ranks in by_node.values():
        for a in ranks:
            for b in ranks:
                if a != b:
                    table[("link", a, b)] = profile.link(a, b).bandwidth_bytes_per_s
    return table


PROFILES = [mixed_profile(), *(p for p in (load_profile(n) for n in list_profiles()) if p.world_size <= 64)]


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_lazy_capacities_equal_the_table_key_for_key(profile: HardwareProfile) -> None:
    table, lazy = reference_table(profile), Paths(profile).capacity
    assert len(lazy) == len(table)
    assert list(lazy) == list(table)  # same keys, same order
    assert {key: lazy[key] for key in table} == table
    assert dict(lazy) == table


def test_keys_the_table_never_had_are_missing() -> None:
    lazy = PathCapacities(mixed_profile())  # ranks 0-2 on node a, 3-4 on node b
    for key in [("link", 0, 0), ("link", 0, 3), ("link", 0, 99), ("link", -1, 0), ("tx", 99), ("cpu", 0), "link"]:
        assert key not in lazy
        assert lazy.get(key) is None
        with pytest.raises(KeyError):
            lazy[key]
    assert ("link", 3, 4) in lazy and ("link", 1, 0) in lazy


def test_one_node_of_ten_thousand_devices_is_never_tabulated() -> None:
    """10⁸ intra-node links: the flow network keeps the mapping, and looks up only what its flows use."""
    gpu = {"name": "g", "kind": "gpu", "count": 10_000, "memory_gib": 1, "source": "[E] test"}
    profile = HardwareProfile.model_validate(
        {
            "schema_version": 2,
            "name": "one-big-node",
            "description": "test",
            "nodes": [{"name": "n", "devices": [gpu]}],
            "network": {"intra_node": make_link(10, 8), "inter_node": make_link(50, 2)},
        }
    )
    paths = Paths(profile)
    assert len(paths.capacity) == 2 + 10_000 * 9_999
    net = FlowNetwork(paths.capacity)
    assert net.capacity is paths.capacity
    assert net.capacity[("link", 9_999, 0)] == 8e9


def test_a_plain_dict_is_still_copied() -> None:
    caps = {"r": 1.0}
    net = FlowNetwork(caps)
    caps["r"] = 2.0
    assert net.capacity["r"] == 1.0
