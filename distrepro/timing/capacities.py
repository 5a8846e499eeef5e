"""The capacities of a profile's network resources, looked up when a flow first uses one.

Why: :class:`distrepro.timing.network.Paths` used to tabulate every intra-node link of every node up front, and a
node of n devices has n(n-1) of them: a single node of 10,000 devices was a 10⁸-entry table before the first
step. A run uses few of them (a ring uses K links, a gossip pair one), and :class:`~distrepro.timing.network.
FlowNetwork` reads a resource's capacity once, when it first sees the resource. So the NICs (two per node) are
tabulated and a link's capacity is computed from the profile when asked: the same value the table held, for
the same keys, and a ``KeyError`` for any other.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping
from typing import Any


class PathCapacities(Mapping[Hashable, float]):
    """Read-only bytes/s of ``("tx", node)`` / ``("rx", node)`` (the node's NIC, else ``network.inter_node``) and
    ``("link", a, b)`` (the intra-node link from rank a to rank b, a != b on one node)."""

    def __init__(self, profile: Any) -> None:  # HardwareProfile (this package imports no profile module)
        self.profile = profile
        self.world_size = profile.world_size
        self._nics: dict[Hashable, float] = {}
        inter = profile.network.inter_node.bandwidth_gbytes_per_s
        for i in range(len(profile.nodes)):
            nic = profile.node_nic(i)
            bw = (nic.bandwidth_gbytes_per_s if nic is not None else inter) * 1e9
            self._nics[("tx", i)] = bw
            self._nics[("rx", i)] = bw
        self._node_of = [profile.node_index(r) for r in range(self.world_size)]

    def _link_ranks(self, key: object) -> tuple[int, int] | None:
        """(a, b) if ``key`` is ``("link", a, b)`` for two ranks of one node, else None."""
        if not (isinstance(key, tuple) and len(key) == 3 and key[0] == "link"):
            return None
        a: object = key[1]
        b: object = key[2]
        if not (isinstance(a, int) and isinstance(b, int) and a != b):
            return None
        k = self.world_size
        return (a, b) if 0 <= a < k and 0 <= b < k and self._node_of[a] == self._node_of[b] else None

    def __getitem__(self, key: Hashable) -> float:
        nic = self._nics.get(key)
        if nic is not None:
            return nic
        ranks = self._link_ranks(key)
        if ranks is None:
            raise KeyError(key)
        return self.profile.link(*ranks).bandwidth_bytes_per_s

    def __contains__(self, key: object) -> bool:
        return key in self._nics or self._link_ranks(key) is not None

    def __iter__(self) -> Iterator[Hashable]:
        """The NICs, then every intra-node link node by node (the old table's order; O(n²) per node if walked)."""
        yield from self._nics
        by_node: dict[int, list[int]] = {}
        for r, node in enumerate(self._node_of):
            by_node.setdefault(node, []).append(r)
        for ranks in by_node.values():
            for a in ranks:
                for b in ranks:
                    if a != b:
                        yield ("link", a, b)

    def __len__(self) -> int:
        sizes: dict[int, int] = {}
        for node in self._node_of:
            sizes[node] = sizes.get(node, 0) + 1
        return len(self._nics) + sum(n * (n - 1) for n in sizes.values())
