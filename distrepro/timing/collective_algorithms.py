"""Collectives as NCCL runs them: which algorithm (ring, tree, hierarchical) and protocol (LL, Simple) a call
uses, what it costs, and which links its data crosses.

Why: a flat ring charged at its worst link was the only collective the emulator knew. NCCL picks, per call,
the algorithm and protocol its own cost model predicts fastest (``ncclTopoTuneModel`` and the cost table in
NVIDIA/nccl ``src/graph/tuning.cc``, read at commit 5067397c), and the choice moves small and medium messages
by large factors. This module restates that rule on a profile's links, for groups of GPUs:

* **ring** (all-reduce ``2(p−1)`` steps, reduce-scatter / all-gather ``p−1``): bandwidth term ``2(p−1)/p · S/B``
  at the ring's slowest link (Patarasuk & Yuan, JPDC 69(2), 2009); latency as NCCL counts it: a base latency per
  call plus one step latency per step, the ``2(N−1)`` steps that cross nodes at the inter-node latency and the
  others at the intra-node one (``tuning.cc``: ``(nsteps − nInterSteps) · intraLat + nInterSteps · interLat``).
* **tree** (all-reduce only; NCCL runs no tree for the others): a chain inside each node and a double binary tree
  between nodes. Latency ``2((L−1) α_intra + ⌊log2 N⌋ α_inter)``; bandwidth as NCCL models it, algorithm
  bandwidth 0.92 × 0.5 × the bus bandwidth, i.e. ``S / (0.46 B)``: from three nodes on a tree moves no fewer bytes
  per link than a ring and NCCL does not pick it for large calls. Between exactly two nodes each byte crosses the
  network once each way, and NCCL rates the tree at up to twice the network's bandwidth and picks it
  (:data:`TWO_NODE_TREE_NET_FACTOR`); a pinned ``tree`` is charged so, ``auto`` keeps the slowest hop's rating
  there (all_reduce_perf between two 8-GPU nodes, NVIDIA/nccl#1048, reached about the NICs' bandwidth as bus
  bandwidth: what a ring gives, half of what such a tree would; see :func:`all_reduce`).
* **hierarchical** (only when pinned; NCCL does not run it on a flat communicator): reduce-scatter inside each
  node, all-reduce of the node shards between nodes (one ring per local index, all through the node's NIC:
  ``2(N−1)/N · S`` through each NIC instead of the flat ring's ``2(p−1)/p · S``), all-gather inside the node
  (Horovod's hierarchical all-reduce; Sergeev & Del Balso, arXiv 1802.05799).
* **broadcast**: NCCL's pipelined ring (a chain) from the source, ``S/B`` plus one step latency per hop.

Protocols: Simple (full bandwidth, the profile's link latency per step, base 8.4 µs) and LL (half the bandwidth,
0.18 × the step latency, base 6.6 µs: ``tuning.cc`` ``baseLat`` Ring {LL 6.6, Simple 8.4}; ``hwLat`` LL/Simple
per step NVLink 0.6/3.4, PCI 1.0/5.7, network 2.7/14 ≈ 0.18-0.19; ring LL bus bandwidth ``0.5 ×``). A call is
charged at the faster one. Two refinements of the same file: LL saves the Simple protocol's own overhead, not the
wire's latency, so a network step under LL takes at least the link's latency less 11.3 µs (14 − 2.7: over TCP
sockets, whose 15-60 µs are the kernel's and the wire's, LL is no longer 0.18 of it); and a ring that crosses
nodes pays NCCL's network post overhead on every step, so its intra-node steps take at least 1 µs (LL) or 3 µs
(Simple) (``getNetOverhead``: "Inter-node rings still have to launch nsteps * net overhead").

A ring's steps are pipelined in slices (NVIDIA/nccl @ 5067397c, ``src/device/prims_simple.h`` ``genericOp``): under
Simple each step's data goes in :data:`RING_SLICES_PER_STEP` slices, and a rank forwards a slice as soon as it has
received and reduced it, so the latency of the next step is spent while the step's other slice is still on the
wire. A step exposes only the part of its latency that one slice's transfer does not cover, and the call pays the
last hop's latency once. NCCL's tuner counts every step's latency whatever the size (its time picks an algorithm; it
is not a prediction): on a large call the two differ by up to ``2(p−1)`` step latencies, e.g. 0.26 of 2.95 ms for
133 MB over 24 A100 across three nodes.

Two corrections of ``ncclTopoGetAlgoTime`` (the time NCCL's tuner gives a call, not only its choice): a ring/Simple
all-reduce across nodes has its whole latency (base and steps) multiplied by 1.4 on GPUs of compute capability 8.0
and above and 1.9 below ("plateau effect of ring"; only when the call moves at least 64 bytes per channel and rank),
and a tree all-reduce of 64 B to 256 MiB runs at a fraction of its modelled bandwidth (``treeCorrectionFactor``, one
figure per protocol and power of two: 0.5-1.0 for LL and Simple).

``auto`` (the default) is NCCL's rule: the cheaper of ring and tree for all-reduce, ring otherwise. ``ring`` keeps
the flat model the emulator used before (every step at the worst link latency, no base latency, no protocol; a
binomial-tree broadcast, Thakur, Rabenseifner & Gropp, IJHPCA 19(1), 2005), and so does every group with a CPU
(gloo), whatever the pin.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from distrepro.timing.nccl_tuning import (
    BASE_LATENCY_US,
    LL_BANDWIDTH_RATIO,
    LL_LATENCY_RATIO,
    LL_NET_SAVING_US,
    NET_OVERHEAD_US,
    PLATEAU_CHANNELS,
    PLATEAU_MIN_BYTES,
    TREE_ALGBW_RATIO,
    TWO_NODE_TREE_NET_FACTOR,
    compute_capability,
    ring_plateau,
    tree_correction,
)

Algorithm = Literal["auto", "ring", "tree", "hierarchical"]
ALGORITHMS: tuple[str, ...] = ("auto", "ring", "tree", "hierarchical")

#: slices a ring step's data is split into under Simple [S] (NVIDIA/nccl @ 5067397c, ``src/include/collectives.h``:
#: ``ALLREDUCE_CHUNKSTEPS / ALLREDUCE_SLICESTEPS`` = (NCCL_STEPS / 2) / (NCCL_STEPS / 4) = 2, the same for all-gather
#: and reduce-scatter; ``src/device/prims_simple.h``: ``sliceSize = max(divUp(nelem, 16 * SlicePerChunk) * 16, ...)``,
#: each slice posted to the next rank once reduced). A module figure so that the validation's ``--ablate`` can set it
#: to 1 (NCCL's tuner: every step's latency paid in full). NCCL's smallest slice (1/32 of a 1 MiB slice, per channel) is
#: not modelled: the emulator has no channels, and a slice that small covers only a few µs of latency anyway
RING_SLICES_PER_STEP = 2


def plateau_of(topo: Topology, size: float) -> float:
    """The factor on a ring/Simple all-reduce's latency of ``size`` bytes over ``topo``: :func:`ring_plateau` across
    nodes from :data:`PLATEAU_MIN_BYTES` per channel and rank, else 1."""
    crosses = topo.n_nodes > 1 and size / (PLATEAU_CHANNELS * len(topo.group)) >= PLATEAU_MIN_BYTES
    return ring_plateau(topo.min_compute_capability) if crosses else 1.0


Hops = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class CollectiveCost:
    """What one call costs: the algorithm and protocol chosen, seconds in all, the latency part of them (the
    rest is the bandwidth term), and the (sender, receiver) hops its data crosses (for link sharing)."""

    algorithm: str
    protocol: str
    seconds: float
    latency_s: float
    hops: Hops


@dataclass(frozen=True)
class _Phase:
    """Latency in steps (intra-node, inter-node), a worst-case latency for gloo, and the bandwidth term;
    ``ring_across``: a ring (all-reduce, reduce-scatter, all-gather) whose steps cross nodes."""

    intra_steps: float
    inter_steps: float
    alpha_intra: float
    alpha_inter: float
    bandwidth_s: float
    gloo_latency_s: float
    ring_across: bool = False

    def simple_latency(self, hidden_s: float = 0.0) -> float:
        """NCCL's Simple step latencies (``tuning.cc``): the links' own, an intra-node step of a ring across nodes at
        least 3 x :data:`NET_OVERHEAD_US`. ``hidden_s``: how much of each step's latency the transfer of the step's
        earlier slices covers (pipelined slices, :data:`RING_SLICES_PER_STEP`); each step exposes the rest, and the
        call still pays its slowest step's latency once (the last slice's hop). 0 gives NCCL's tuner's sum."""
        intra = max(self.alpha_intra, 3 * NET_OVERHEAD_US * 1e-6) if self.ring_across else self.alpha_intra
        if hidden_s <= 0.0:
            return self.intra_steps * intra + self.inter_steps * self.alpha_inter
        exposed = self.intra_steps * max(intra - hidden_s, 0.0) + self.inter_steps * max(
            self.alpha_inter - hidden_s, 0.0
        )
        slowest = max(intra if self.intra_steps else 0.0, self.alpha_inter if self.inter_steps else 0.0)
        return exposed + min(slowest, hidden_s)

    def ll_latency(self) -> float:
        """LL's step latencies: :data:`LL_LATENCY_RATIO` of Simple's, a network step no less than its link's latency
        less :data:`LL_NET_SAVING_US`, an intra-node step of a ring across nodes no less than
        :data:`NET_OVERHEAD_US`."""
        intra = LL_LATENCY_RATIO * self.alpha_intra
        if self.ring_across:
            intra = max(intra, NET_OVERHEAD_US * 1e-6)
        inter = max(LL_LATENCY_RATIO * self.alpha_inter, self.alpha_inter - LL_NET_SAVING_US * 1e-6)
        return self.intra_steps * intra + self.inter_steps * inter


class Topology:
    """How a group sits on the profile: its ranks per node (in group order) and the link figures of each hop.

    ``link(a, b)`` is the profile's resolved link (latency in s, bandwidth in B/s, per-pattern efficiency
    applied by the caller)."""

    def __init__(self, profile, group: tuple[int, ...]) -> None:  # HardwareProfile (no import: no cycle)
        self.profile = profile
        self.group = group
        nodes: dict[int, list[int]] = {}
        for r in group:
            nodes.setdefault(profile.node_index(r), []).append(r)
        self.nodes = list(nodes.values())
        self.gpu_only = all(profile.device(r).kind == "gpu" for r in group)
        capabilities = [compute_capability(profile.device(r).name) for r in group]
        known = [c for c in capabilities if c is not None]
        self.min_compute_capability = min(known) if known else None

    @property
    def n_nodes(self) -> int:
        return len(self.nodes)

    def worst(self, hops: Sequence[tuple[int, int]]) -> tuple[float, float, float, float]:
        """(worst intra latency, worst inter latency, smallest bandwidth, worst latency) over ``hops``."""
        intra = inter = 0.0
        bandwidth = math.inf
        for a, b in hops:
            link = self.profile.link(a, b)
            if self.profile.node_index(a) == self.profile.node_index(b):
                intra = max(intra, link.latency_s)
            else:
                inter = max(inter, link.latency_s)
            bandwidth = min(bandwidth, link.bandwidth_bytes_per_s)
        return intra, inter, bandwidth, max(intra, inter)


def ring_hops(group: Sequence[int]) -> Hops:
    p = len(group)
    return tuple((group[i], group[(i + 1) % p]) for i in range(p)) if p > 1 else ()


def chain_hops(order: Sequence[int]) -> Hops:
    return tuple((order[i], order[i + 1]) for i in range(len(order) - 1))


def binomial_hops(group: Sequence[int], src: int) -> Hops:
    """The binomial tree rooted at ``src`` (group order rotated to start there): in round k member i < 2^k
    sends to i + 2^k."""
    p = len(group)
    if p <= 1:
        return ()
    start = list(group).index(src)
    order = tuple(group[start:]) + tuple(group[:start])
    levels = (p - 1).bit_length()
    return tuple((order[i], order[i + (1 << k)]) for k in range(levels) for i in range(1 << k) if i + (1 << k) < p)


def _ring_phase(topo: Topology, steps_per_rank: int, volume: float, eff: float) -> tuple[_Phase, Hops]:
    """A ring over the whole group: ``steps_per_rank`` × (p−1) steps, ``volume`` bytes per link."""
    group = topo.group
    p = len(group)
    hops = ring_hops(group)
    a_in, a_out, bandwidth, a_worst = topo.worst(hops)
    steps = steps_per_rank * (p - 1)
    inter = steps_per_rank * (topo.n_nodes - 1) if topo.n_nodes > 1 else 0
    gloo = steps * a_worst
    phase = _Phase(steps - inter, inter, a_in, a_out, volume / (bandwidth * eff), gloo, topo.n_nodes > 1)
    return phase, hops


def _tree_phase(topo: Topology, size: float, eff: float, two_nodes_doubled: bool = False) -> tuple[_Phase, Hops]:
    """NCCL's tree all-reduce: chains inside nodes, a binary tree between the nodes' first ranks. Its bandwidth is
    the slowest hop's; with ``two_nodes_doubled``, between exactly two nodes, the chains' slowest, up to
    :data:`TWO_NODE_TREE_NET_FACTOR` times the network's (what a tree between two nodes moves; charged when the tree
    is pinned, see :func:`all_reduce`)."""
    heads = [ranks[0] for ranks in topo.nodes]
    hops: list[tuple[int, int]] = []
    for ranks in topo.nodes:
        hops += chain_hops(ranks) + chain_hops(ranks[::-1])
    tree = [(heads[i], heads[(i - 1) // 2]) for i in range(1, len(heads))]
    a_in, a_out, bandwidth, a_worst = topo.worst(hops + tree + [(b, a) for a, b in tree])
    if two_nodes_doubled and topo.n_nodes == 2:
        _, _, net, _ = topo.worst(tree + [(b, a) for a, b in tree])
        chains = topo.worst(hops)[2] if hops else math.inf
        bandwidth = min(chains, TWO_NODE_TREE_NET_FACTOR * net)
    # for link sharing, each node's NIC is crossed once each way (a ring over the heads): the charge's bandwidth
    # term already holds the tree's volume, so a flow alone must not be slowed by counting a NIC twice
    hops += ring_hops(heads)
    local = max(len(ranks) for ranks in topo.nodes)
    levels = int(math.log2(topo.n_nodes)) if topo.n_nodes > 1 else 0
    bw_s = size / (bandwidth * eff * TREE_ALGBW_RATIO)
    phase = _Phase(2 * (local - 1), 2 * levels, a_in, a_out, bw_s, 2 * (local - 1 + levels) * a_worst)
    return phase, tuple(hops)


def _hierarchical_phase(topo: Topology, size: float, eff: float, kind: str) -> tuple[_Phase, Hops] | None:
    """Intra-node reduce-scatter, inter-node all-reduce (all-reduce) or reduce-scatter / all-gather of the node
    shards, intra-node all-gather; None when the nodes hold different numbers of the group's ranks."""
    local = len(topo.nodes[0])
    n = topo.n_nodes
    if any(len(ranks) != local for ranks in topo.nodes) or n < 2 or local < 2:
        return None
    intra = [h for ranks in topo.nodes for h in ring_hops(ranks)]
    inter = [h for i in range(local) for h in ring_hops([ranks[i] for ranks in topo.nodes])]
    ai, _, b_intra, _ = topo.worst(intra)
    _, ao, b_inter, _ = topo.worst(inter)
    # every local index's inter-node ring crosses the node's NIC: their shards add up to S through it
    b_nic = min(b_inter, _nic_share(topo, local))
    intra_passes = 2 if kind == "all_reduce" else 1
    inter_factor = 2 * (n - 1) / n if kind == "all_reduce" else (n - 1) / n
    bw_s = (intra_passes * (local - 1) / local * size / b_intra + inter_factor * size / b_nic) / eff
    intra_steps = intra_passes * (local - 1)
    inter_steps = (2 if kind == "all_reduce" else 1) * (n - 1)
    phase = _Phase(intra_steps, inter_steps, ai, ao, bw_s, intra_steps * ai + inter_steps * ao)
    # link sharing: the shard rings together cross each NIC once each way (their bytes add up to the charge's)
    return phase, tuple(intra + inter[:n])


def _nic_share(topo: Topology, local: int) -> float:
    """Bytes/s one node's NIC gives the node's ``local`` concurrent shard rings together (its bandwidth: each
    ring carries 1/local of the data, so the NIC bandwidth is what the whole transfer sees)."""
    out = math.inf
    for i, _ in enumerate(topo.nodes):
        nic = topo.profile.node_nic(topo.profile.node_index(topo.nodes[i][0]))
        if nic is not None:
            out = min(out, nic.bandwidth_gbytes_per_s * 1e9)
    return out


def _classic(algorithm: str, phase: _Phase, hops: Hops) -> CollectiveCost:
    """The flat alpha-beta charge: every step at the worst latency, no base latency, no protocol choice (gloo's
    groups, and ``collective_algorithm: ring``)."""
    return CollectiveCost(algorithm, "classic", phase.gloo_latency_s + phase.bandwidth_s, phase.gloo_latency_s, hops)


def _charge(
    algorithm: str,
    phase: _Phase,
    hops: Hops,
    plateau: float = 1.0,
    tree_size: float | None = None,
    sliced: bool = False,
) -> CollectiveCost:
    """The phase as NCCL charges it: base latency plus step latencies, at the faster of LL and Simple. ``plateau``
    multiplies Simple's latency (a ring all-reduce across nodes, :data:`RING_PLATEAU`); ``tree_size``: a tree
    all-reduce of that many bytes, its bandwidth term divided by :func:`tree_correction`; ``sliced``: a ring whose
    steps go in :data:`RING_SLICES_PER_STEP` pipelined slices under Simple (one slice's transfer hides as much of a
    step's latency)."""
    steps = phase.intra_steps + phase.inter_steps
    slices = RING_SLICES_PER_STEP if sliced else 1
    hidden = (slices - 1) * phase.bandwidth_s / (steps * slices) if steps > 0 else 0.0
    simple_lat = (BASE_LATENCY_US["simple"] * 1e-6 + phase.simple_latency(hidden)) * plateau
    ll_lat = BASE_LATENCY_US["ll"] * 1e-6 + phase.ll_latency()
    simple_bw, ll_bw = phase.bandwidth_s, phase.bandwidth_s / LL_BANDWIDTH_RATIO
    if tree_size is not None:
        simple_bw /= tree_correction("simple", tree_size)
        ll_bw /= tree_correction("ll", tree_size)
    simple = simple_lat + simple_bw
    ll = ll_lat + ll_bw
    if ll < simple:
        return CollectiveCost(algorithm, "ll", ll, ll_lat, hops)
    return CollectiveCost(algorithm, "simple", simple, simple_lat, hops)


def all_reduce(topo: Topology, size: float, algorithm: str, eff: float) -> CollectiveCost:
    """All-reduce of ``size`` bytes over the group with ``algorithm`` (``auto``: NCCL's pick; ``ring``: the flat
    textbook ring)."""
    p = len(topo.group)
    phase, hops = _ring_phase(topo, 2, 2 * (p - 1) / p * size, eff)
    if algorithm == "ring" or not topo.gpu_only:
        return _classic("ring", phase, hops)
    ring = _charge("ring", phase, hops, plateau_of(topo, size), sliced=True)
    if algorithm == "hierarchical":
        hier = _hierarchical_phase(topo, size, eff, "all_reduce")
        return ring if hier is None else _charge("hierarchical", *hier)
    if algorithm == "tree":
        return _charge("tree", *_tree_phase(topo, size, eff, two_nodes_doubled=True), tree_size=size)
    # ``auto`` rates the tree at its slowest hop on two nodes as well: NCCL (v2.21.5-1 and 5067397c) rates it at up
    # to twice the network's there and so picks it for large calls, but the one two-node nccl-tests point scored
    # (NVIDIA/nccl#1048, its algorithm not stated) measures less than the ring's bound, let alone the tree's; which
    # rule the authors' runs met is open (docs/emulator.md, "Two nodes: NCCL's tree")
    tree = _charge("tree", *_tree_phase(topo, size, eff), tree_size=size)
    return tree if tree.seconds < ring.seconds else ring


def scatter_or_gather(topo: Topology, size_total: float, algorithm: str, eff: float, kind: str) -> CollectiveCost:
    """Reduce-scatter or all-gather of an ``size_total``-byte vector: NCCL's ring (``tree`` runs the ring too, as
    NCCL has no tree for these); ``hierarchical`` goes inside the node first; ``ring``: the flat textbook ring."""
    p = len(topo.group)
    phase, hops = _ring_phase(topo, 1, (p - 1) / p * size_total, eff)
    if algorithm == "ring" or not topo.gpu_only:
        return _classic("ring", phase, hops)
    if algorithm == "hierarchical":
        hier = _hierarchical_phase(topo, size_total, eff, kind)
        if hier is not None:
            return _charge("hierarchical", *hier)
    return _charge("ring", phase, hops, sliced=True)


def broadcast(topo: Topology, src: int, size: float, algorithm: str, eff: float) -> CollectiveCost:
    """NCCL's pipelined ring (a chain) from ``src``: ``S/B`` plus one step latency per hop. The flat model
    (``ring``, ``tree``, and every group with a CPU) runs the binomial tree: ``⌈log2 p⌉ · (α + S/B)`` at its worst
    link (MPICH's short-message broadcast)."""
    group = topo.group
    p = len(group)
    if algorithm in ("ring", "tree") or not topo.gpu_only:
        hops = binomial_hops(group, src)
        _, _, bandwidth, alpha = topo.worst(hops)
        levels = math.ceil(math.log2(p))
        seconds = levels * (alpha + size / (bandwidth * eff))
        return CollectiveCost("binomial", "classic", seconds, levels * alpha, hops)
    start = group.index(src)
    hops = chain_hops(group[start:] + group[:start])
    a_in, a_out, bandwidth, a_worst = topo.worst(hops)
    inter = sum(1 for a, b in hops if topo.profile.node_index(a) != topo.profile.node_index(b))
    phase = _Phase(len(hops) - inter, inter, a_in, a_out, size / (bandwidth * eff), len(hops) * a_worst)
    return _charge("pipelined ring", phase, hops)
