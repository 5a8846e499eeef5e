"""The pair-by-pair link rule (before link classes) and a profile with every kind of cap, shared by the tests of
link classes and of the budget check."""

from __future__ import annotations

from itertools import combinations
from typing import Any

from distrepro.hardware.profile_parts import ResolvedLink, resolve_link
from distrepro.hardware.profiles import HardwareProfile


def reference_link(profile: HardwareProfile, a: int, b: int) -> ResolvedLink:
    """The rule before link classes, transcribed: base link of the pair, capped by both devices' and, across
    nodes, both nodes' NICs."""
    na, nb = profile.node_index(a), profile.node_index(b)
    base = profile.network.intra_node if na == nb else profile.network.inter_node
    caps = [profile.device(a).nic, profile.device(b).nic]
    if na != nb:
        caps += [profile.node_nic(na), profile.node_nic(nb)]
    return resolve_link(base, *caps, overhead_us=profile.network.message_overhead_us)


def reference_first_pairs(profile: HardwareProfile) -> list[tuple[tuple[int, int], ResolvedLink]]:
    seen: dict[ResolvedLink, tuple[int, int]] = {}
    for a, b in combinations(range(profile.world_size), 2):
        seen.setdefault(reference_link(profile, a, b), (a, b))
    return sorted(((pair, link) for link, pair in seen.items()), key=lambda item: item[0])


def make_link(lat: float, bw: float) -> dict[str, Any]:
    return {"latency_us": lat, "bandwidth_gbytes_per_s": bw, "source": "[E] test"}


def mixed_profile() -> HardwareProfile:
    """Every way a path is capped: node NICs (schema 2), device NICs, a one-device node whose device NIC is its
    node's, nodes without any, unequal node sizes, a message overhead; NICs that tie on one figure only."""
    gpu = {"kind": "gpu", "memory_gib": 24, "source": "[E] test"}
    return HardwareProfile.model_validate(
        {
            "schema_version": 2,
            "name": "mixed",
            "description": "test",
            "nodes": [
                {"name": "a", "devices": [dict(gpu, name="g", count=3)]},
                {"name": "b", "nic": make_link(20, 1.5), "devices": [dict(gpu, name="g", count=2)]},
                {"name": "c", "devices": [dict(gpu, name="g", count=1, nic=make_link(5, 0.5))]},
                {
                    "name": "d",
                    "devices": [dict(gpu, name="g", count=2, nic=make_link(40, 9)), dict(gpu, name="h", count=3)],
                },
                {
                    "name": "e",
                    "nic": make_link(20, 1.5),
                    "devices": [dict(gpu, name="g", count=1, nic=make_link(400, 12))],
                },
                {"name": "f", "devices": [dict(gpu, name="g", count=4)]},
            ],
            "network": {
                "intra_node": make_link(10, 10),
                "inter_node": make_link(50, 2),
                "message_overhead_us": 7.5,
                "overhead_source": "[E] test",
            },
        }
    )
