"""Links between ranks by class: what a K-device profile resolves in time and memory linear in K.

Why: the path between ranks ``a`` and ``b`` used to be resolved and cached per pair, and the pair table is
K²/2 entries (K = 10,000: 50 million links, gigabytes, minutes). A path is the base link (``network.intra_node``
within a node, ``network.inter_node`` across) capped by the NICs on the way, and the cap is a max of latencies
and a min of bandwidths (:func:`~distrepro.hardware.profile_parts.resolve_link`): exact, commutative and
idempotent on floats. So each rank carries one *signature* per kind of path, its own caps already folded into
the base link, and the path between two ranks is the two signatures combined. A cluster has few distinct
signatures (one per distinct NIC, usually one), so the links are a handful of classes keyed by (same node,
signature, signature), each resolved once, and the results are bit for bit those of the pair-by-pair rule.

:class:`LinkClasses` also answers what a whole-cluster question needs without visiting K² pairs: every distinct
link with the lexicographically first pair of ranks it joins (the budget check's slowest link, which must name
the same pair a scan over all pairs names).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

from distrepro.hardware.profile_parts import Link, ResolvedLink

#: a signature: (latency in us, bandwidth in GB/s) of the base link after this rank's own caps
Signature = tuple[float, float]


def _fold(latency_us: float, bandwidth: float, caps: Sequence[Link | None]) -> Signature:
    for cap in caps:  # the rule of resolve_link: the largest latency and the smallest bandwidth win
        if cap is not None:
            latency_us = max(latency_us, cap.latency_us)
            bandwidth = min(bandwidth, cap.bandwidth_gbytes_per_s)
    return latency_us, bandwidth


class LinkClasses:
    """Every rank's node and path signatures, and the distinct links between ranks, each resolved once.

    ``node_of[r]``: rank r's node index (ranks are numbered node by node, so each node's ranks are contiguous,
    ``node_end[i]`` is one past its last); ``intra[r]`` / ``inter[r]``: the id of r's signature within its node /
    across nodes (``network.intra_node`` capped by its device's NIC; ``network.inter_node`` capped by its device's
    and its node's NIC).
    """

    def __init__(
        self,
        node_of: Sequence[int],
        intra_caps: Sequence[Sequence[Link | None]],
        inter_caps: Sequence[Sequence[Link | None]],
        intra_node: Link,
        inter_node: Link,
        overhead_us: float,
    ) -> None:
        self.node_of = list(node_of)
        self.node_end: list[int] = []
        for rank, node in enumerate(self.node_of):
            if node == len(self.node_end):
                self.node_end.append(rank + 1)
            else:
                self.node_end[node] = rank + 1
        self.overhead_us = overhead_us
        self.signatures: list[list[Signature]] = [[], []]  # [intra, inter]: id -> signature
        self.intra = self._intern(0, intra_node, intra_caps)
        self.inter = self._intern(1, inter_node, inter_caps)
        self._links: dict[tuple[int, int, int], ResolvedLink] = {}

    def _intern(self, kind: int, base: Link, caps: Sequence[Sequence[Link | None]]) -> list[int]:
        ids: dict[Signature, int] = {}
        out = []
        for rank_caps in caps:
            sig = _fold(base.latency_us, base.bandwidth_gbytes_per_s, rank_caps)
            out.append(ids.setdefault(sig, len(ids)))
        self.signatures[kind] = list(ids)
        return out

    def link(self, a: int, b: int) -> ResolvedLink:
        """The path between ranks ``a`` and ``b`` (both in range, a != b)."""
        kind = 0 if self.node_of[a] == self.node_of[b] else 1
        ids = self.intra if kind == 0 else self.inter
        x, y = ids[a], ids[b]
        key = (kind, x, y) if x <= y else (kind, y, x)
        cached = self._links.get(key)
        if cached is None:
            cached = self._links[key] = self._resolve(*key)
        return cached

    def _resolve(self, kind: int, x: int, y: int) -> ResolvedLink:
        (lat_x, bw_x), (lat_y, bw_y) = self.signatures[kind][x], self.signatures[kind][y]
        latency_us, bandwidth = max(lat_x, lat_y), min(bw_x, bw_y)
        return ResolvedLink(latency_s=(latency_us + self.overhead_us) / 1e6, bandwidth_bytes_per_s=bandwidth * 1e9)

    def first_pairs(self) -> list[tuple[tuple[int, int], ResolvedLink]]:
        """Every distinct link between two ranks with the first pair (a < b, in lexicographic order) it joins,
        in the order of those pairs: what a scan of ``combinations(range(K), 2)`` meets first, link by link (two
        classes of signatures that resolve to equal figures are one link).

        Time: O(K) to list each signature's ranks, then for each ordered pair of signatures a binary search
        (across nodes) or one per node (within a node): linear in K for a fixed number of distinct NICs.
        """
        found: dict[ResolvedLink, tuple[int, int]] = {}  # classes of equal figures are one link
        for kind, ids in ((0, self.intra), (1, self.inter)):
            ranks_of: list[list[int]] = [[] for _ in self.signatures[kind]]
            for rank, sig in enumerate(ids):
                ranks_of[sig].append(rank)
            for xs in ranks_of:
                for ys in ranks_of:
                    pair = self._first_across(xs, ys) if kind else self._first_within(xs, ys)
                    if pair is not None:
                        link = self.link(*pair)
                        if link not in found or pair < found[link]:
                            found[link] = pair
        return sorted(((pair, link) for link, pair in found.items()), key=_by_pair)

    def _first_across(self, xs: list[int], ys: list[int]) -> tuple[int, int] | None:
        """The first (a, b), a in xs, b in ys, a < b on different nodes. If the first a has no such b, no later a
        has one: a later a's candidates lie past its own node's end, past the first a's."""
        if not xs:
            return None
        a = xs[0]
        j = bisect_left(ys, self.node_end[self.node_of[a]])
        return (a, ys[j]) if j < len(ys) else None

    def _first_within(self, xs: list[int], ys: list[int]) -> tuple[int, int] | None:
        """The first (a, b), a in xs, b in ys, a < b on one node: per node, its first a and the next b after it."""
        i = 0
        while i < len(xs):
            a = xs[i]
            end = self.node_end[self.node_of[a]]
            j = bisect_left(ys, a + 1)
            if j < len(ys) and ys[j] < end:
                return a, ys[j]
            i = bisect_left(xs, end)  # no later a of this node does better: the next b is past the node
        return None


def _by_pair(item: tuple[tuple[int, int], ResolvedLink]) -> tuple[int, int]:
    return item[0]
