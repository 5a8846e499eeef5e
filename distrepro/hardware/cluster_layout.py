"""What a method may know of the cluster before it trains: the node and device kind of each rank.

A hardware profile holds far more (speeds, links, ranges); a method's ``skip`` and its context see only this layout
(:class:`distrepro.api.allocation.ClusterLayout`), built here from the profile so the engines, the plan, the
sensitivity replay and the conformance checks all read one derivation.
"""

from __future__ import annotations

from distrepro.api.allocation import ClusterLayout
from distrepro.hardware.profiles import HardwareProfile


def cluster_layout(profile: HardwareProfile) -> ClusterLayout:
    """``ctx.cluster`` of a hardware profile: the node and device kind of each rank."""
    n = profile.world_size
    return ClusterLayout(
        n,
        tuple(profile.node_index(r) for r in range(n)),
        tuple(node.name for node in profile.nodes),
        tuple(profile.device(r).kind for r in range(n)),
    )
