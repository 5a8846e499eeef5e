"""What a ring collective can use of a node whose GPUs are not all linked to each other.

Why: a uniform intra-node link says every pair of GPUs has the node's full NVLink bandwidth, which holds on an
NVSwitch (DGX-2, HGX A100/H100) and not on a hybrid cube-mesh (DGX-1), where a V100's six NVLink2 links go to four
of the seven other GPUs, one or two links per pair (NVIDIA, "NVIDIA DGX-1 With Tesla V100 System Architecture",
white paper WP-08437-002, 2017, Fig. 4; ``nvidia-smi topo -m`` on a DGX-1V: NV1 / NV2 per pair, SYS for the
unlinked). NCCL runs a ring collective as several rings (channels) at once, each entering and leaving every GPU
over one link (NVIDIA/nccl ``src/graph/search.cc``: rings are searched over the NVLink graph, a link's bandwidth
shared by the channels crossing it). So what a group of k GPUs gets per GPU and direction is the number of
directed Hamiltonian rings over the group that fit in the links, times one link's bandwidth:

* **k = 2**: each of the pair's m links carries the exchange both ways: m links;
* **k >= 3**: a ring and its reverse use each link of an undirected Hamiltonian cycle once in each direction, so
  c edge-disjoint cycles (a pair with m links may appear in m of them) give 2c directed rings.

:func:`ring_links` finds the largest c by exhaustive search (at most 8 GPUs: 2,520 cycles), so the figure is what
the wiring allows; NCCL's heuristic search reaches it on a DGX-1V (3 cycles: 6 rings x 25 GB/s = 150 GB/s per GPU
at 8 GPUs, 2 cycles in a quad of 4: 100 GB/s, one or two links for a pair: 25 or 50 GB/s).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

#: links between the GPUs of a DGX-1 with V100 (NVLink2, 25 GB/s per link and direction) [S]: NVIDIA DGX-1 V100
#: white paper WP-08437-002 (2017), Fig. 4, as ``nvidia-smi topo -m`` reports it (NV1 = 1 link, NV2 = 2 links)
DGX1_V100_NVLINKS: tuple[tuple[int, ...], ...] = (
    (0, 1, 1, 2, 2, 0, 0, 0),
    (1, 0, 2, 1, 0, 2, 0, 0),
    (1, 2, 0, 2, 0, 0, 1, 0),
    (2, 1, 2, 0, 0, 0, 0, 1),
    (2, 0, 0, 0, 0, 1, 1, 2),
    (0, 2, 0, 0, 1, 0, 2, 1),
    (0, 0, 1, 0, 1, 2, 0, 2),
    (0, 0, 0, 1, 2, 1, 2, 0),
)
#: links between the 8 V100-SXM2-16GB of one node of OneFlow's DLPerf cluster [M], from the report's own ``nvidia-smi
#: topo -m`` (Oneflow-Inc/DLPerf @ c89430ba, reports/dlperf_benchmark_test_report_v1.md, "Hardware"): NV1/NV2 to four
#: of the seven other GPUs, SYS to the rest, pair for pair the DGX-1's wiring above
DLPERF_V100_NVLINKS = DGX1_V100_NVLINKS
#: exhaustive search bound: (k - 1)! / 2 undirected cycles
MAX_GROUP = 8
#: a pair of GPUs, the smaller first
Edge = tuple[int, int]


def _cycles(members: Sequence[int], links: Sequence[Sequence[int]]) -> list[tuple[Edge, ...]]:
    """Every undirected Hamiltonian cycle over ``members`` whose consecutive pairs are linked, as sorted edges."""
    first, rest = members[0], list(members[1:])
    out = []
    for order in itertools.permutations(rest):
        if order[0] > order[-1]:  # each undirected cycle once
            continue
        tour = (first, *order, first)
        edges = tuple((min(a, b), max(a, b)) for a, b in itertools.pairwise(tour))
        if all(links[a][b] > 0 for a, b in edges):
            out.append(edges)
    return out


def _pack(cycles: list[tuple[Edge, ...]], left: dict[Edge, int], start: int) -> int:
    """The most cycles (from ``start`` on, repeats allowed) that fit in the links ``left``: exhaustive."""
    best = 0
    for i in range(start, len(cycles)):
        edges = cycles[i]
        if all(left[e] >= edges.count(e) for e in edges):
            for e in edges:
                left[e] -= 1
            best = max(best, 1 + _pack(cycles, left, i))
            for e in edges:
                left[e] += 1
    return best


def ring_links(links: Sequence[Sequence[int]], members: Sequence[int]) -> int:
    """Links' worth of bandwidth per GPU and direction a ring collective over ``members`` can use: the pair's links
    for two GPUs, twice the most edge-disjoint Hamiltonian cycles for more (see the module docstring); 0 when the
    members cannot form a ring over the links alone."""
    members = list(members)
    if len(members) < 2:
        return 0
    if len(members) > MAX_GROUP:
        raise ValueError(f"ring search over {len(members)} GPUs: at most {MAX_GROUP} in one node")
    if len(members) == 2:
        return links[members[0]][members[1]]
    cycles = _cycles(members, links)
    left = {(min(a, b), max(a, b)): links[a][b] for a, b in itertools.combinations(members, 2)}
    return 2 * _pack(cycles, left, 0)
