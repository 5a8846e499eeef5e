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

Algorithm = Literal["auto", "ring", "tree", "hierarchical"]
ALGORITHMS: tuple[str, ...] = ("auto", "ring", "tree", "hierarchical")

#: NCCL base latency per call, µs (``tuning.cc`` baseLat, Ring and Tree rows)
BASE_LATENCY_US = {"simple": 8.4, "ll": 6.6}
#: LL's step latency relative to Simple's (``tuning.cc`` hwLat: 0.6/3.4, 1.0/5.7, 2.7/14)
LL_LATENCY_RATIO = 0.18
#: what LL saves per network step: the Simple protocol's own overhead (its flush and flag handshake), ``tuning.cc``
#: hwLat NET Ring Simple 14 - LL 2.7 µs. LL cannot make the wire faster: a network step takes at least the link's
#: latency less this, so over a link whose latency is the wire's (TCP sockets, 15-60 µs) LL's step is that latency
#: less 11.3 µs, not 0.18 of it (on InfiniBand's 14 µs both rules give NCCL's 2.7)
LL_NET_SAVING_US = 14.0 - 2.7
#: NCCL's network post overhead, µs (``tuning.cc`` ``getNetOverhead``: 1 on Intel and other CPUs, 2 on AMD): a ring
#: that crosses nodes "still has to launch nsteps * net overhead", so each of its intra-node steps takes at least
#: this (Simple: 3 times it) [S]; the CPU vendor is not in a profile, NCCL's default is taken
NET_OVERHEAD_US = 1.0
#: LL's bandwidth relative to Simple's (``tuning.cc``: ring LL ``busBw * .5``)
LL_BANDWIDTH_RATIO = 0.5
#: NCCL's tree all-reduce: bus bandwidth × 0.92, algorithm bandwidth = bus bandwidth × 0.5 (``tuning.cc``)
TREE_ALGBW_RATIO = 0.92 * 0.5
#: a tree between exactly two nodes: its bus bandwidth is the intra-node chain's, up to this many times the
#: network's [S]. Each of the double tree's two trees has one inter-node edge, carrying that tree's half of the data
#: up and back down, so each byte crosses the network once each way where the intra-node chain carries it twice.
#: NCCL's topology search raises a tree's intra-node speed while it is below twice the inter-node one ("increase
#: bwIntra for trees (2 nodes or collnet)", ``src/graph/search.cc`` @ 5067397c and v2.21.5-1, the version the
#: Decent-DP authors pin), and ``ncclTopoTuneModel`` rates every algorithm at ``bwIntra`` when ``nNodes <= 2``
#: (``tuning.cc``): NCCL's maintainers, NVIDIA/nccl#946 "the Tree performance can go up to ~2x the network speed
#: ... NCCL should use Tree on 2 nodes for large sizes", NVIDIA/nccl-tests#196 (two nodes of 8 PCIe GPUs, one
#: 100 Gb/s NIC each: bus bandwidth above the NIC's)
TWO_NODE_TREE_NET_FACTOR = 2.0

#: the per-channel speeds in GB/s NCCL's topology search tries for an inter-node channel of a Volta or Ampere GPU,
#: fastest first (``src/graph/search.cc`` ``speedArrayInter`` @ 5067397c; Hopper and Blackwell have tables of their
#: own)
NCCL_INTER_SPEEDS: tuple[float, ...] = (48, 30, 28, 24, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3, 2.4, 1.2, 0.24, 0.12)


def nccl_net_gbytes_per_s(nic_gbytes_per_s: float) -> float:
    """What NCCL's own model gives a channel through a NIC of ``nic_gbytes_per_s`` line rate (``topo.cc``: a NIC's
    bandwidth is its speed in Mb/s / 8000): the largest speed of :data:`NCCL_INTER_SPEEDS` at or below it.
    A 200 Gb/s HDR HCA (25 GB/s) runs at 24 GB/s, a 100 Gb/s EDR one (12.5) at 12: 0.96 of the line rate."""
    fitting = [s for s in NCCL_INTER_SPEEDS if s <= nic_gbytes_per_s]
    if not fitting:
        raise ValueError(f"a NIC of {nic_gbytes_per_s} GB/s is below NCCL's slowest channel speed")
    return float(fitting[0])


#: ``ncclTopoGetAlgoTime``'s "plateau effect of ring": a ring/Simple all-reduce across nodes has its latency multiplied
#: by this, below compute capability 8.0 and from it on (``tuning.cc`` @ 5067397c) [S]
RING_PLATEAU = {"below_sm80": 1.9, "sm80_and_above": 1.4}
#: ... only when the call moves at least this many bytes per channel and rank (``nBytes / (nChannels * nRanks)``)
PLATEAU_MIN_BYTES = 64
#: the emulator does not model NCCL's channels: the factor is applied where NCCL applies it whatever its channel
#: count, up to its ``MAXCHANNELS`` (``src/include/device.h``: 64)
PLATEAU_CHANNELS = 64
#: compute capability x 10 by GPU name (NVIDIA's CUDA GPUs table: T4 7.5, V100 7.0, A100 8.0, A40 and RTX 3090 8.6,
#: H100 9.0), matched against a device's name, longest key first; a GPU not named here is taken as 8.0 or above
COMPUTE_CAPABILITY = {"t4": 75, "v100": 70, "a100": 80, "a40": 86, "rtx3090": 86, "h100": 90, "h200": 90}
#: ``tuning.cc`` ``treeCorrectionFactor``: a tree all-reduce's bandwidth is multiplied by the entry of
#: ``log2(nBytes / 64)`` (0-22, i.e. 64 B to 256 MiB) of its protocol (in tenths); larger calls keep the model's
#: bandwidth
TREE_CORRECTION = {
    "ll": tuple(t / 10 for t in (10, 10, 10, 10, 9, 8, 7, 7, 7, 7, 6, 5, 4, 4, 5, 6, 7, 8, 9, 10, 10, 10, 10)),
    "simple": tuple(t / 10 for t in (9, 9, 9, 9, 9, 9, 9, 8, 7, 6, 6, 5, 5, 5, 5, 6, 7, 8, 7, 7, 8, 9, 9)),
}


def compute_capability(device_name: str) -> int | None:
    """Compute capability x 10 of the GPU named ``device_name`` (``a100``, ``t4-node3``), None if not tabled."""
    name = device_name.lower()
    for key in sorted(COMPUTE_CAPABILITY, key=len, reverse=True):
        if name.startswith(key):
            return COMPUTE_CAPABILITY[key]
    return None


def ring_plateau(min_compute_capability: int | None) -> float:
    """The plateau factor for a group whose oldest GPU has ``min_compute_capability`` (None: not tabled, 8.0+)."""
    old = min_compute_capability is not None and min_compute_capability < 80
    return RING_PLATEAU["below_sm80" if old else "sm80_and_above"]


def plateau_of(topo: Topology, size: float) -> float:
    """The factor on a ring/Simple all-reduce's latency of ``size`` bytes over ``topo``: :func:`ring_plateau` across
    nodes from :data:`PLATEAU_MIN_BYTES` per channel and rank, else 1."""
    crosses = topo.n_nodes > 1 and size / (PLATEAU_CHANNELS * len(topo.group)) >= PLATEAU_MIN_BYTES
    return ring_plateau(topo.min_compute_capability) if crosses else 1.0


def tree_correction(protocol: str, nbytes: float) -> float:
    """``treeCorrectionFactor`` of a tree all-reduce of ``nbytes`` under ``protocol`` (1 outside 64 B-256 MiB)."""
    units = int(nbytes) >> 6
    if units < 1:
        return 1.0
    log_size = units.bit_length() - 1
    table = TREE_CORRECTION[protocol]
    return table[log_size] if log_size < len(table) else 1.0


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

    def simple_latency(self) -> float:
        """NCCL's Simple step latencies (``tuning.cc``): the links' own, an intra-node step of a ring across nodes at
        least 3 x :data:`NET_OVERHEAD_US`."""
        intra = max(self.alpha_intra, 3 * NET_OVERHEAD_US * 1e-6) if self.ring_across else self.alpha_intra
        return self.intra_steps * intra + self.inter_steps * self.alpha_inter

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
    algorithm: str, phase: _Phase, hops: Hops, plateau: float = 1.0, tree_size: float | None = None
) -> CollectiveCost:
    """The phase as NCCL charges it: base latency plus step latencies, at the faster of LL and Simple. ``plateau``
    multiplies Simple's latency (a ring all-reduce across nodes, :data:`RING_PLATEAU`); ``tree_size``: a tree
    all-reduce of that many bytes, its bandwidth term divided by :func:`tree_correction`."""
    simple_lat = (BASE_LATENCY_US["simple"] * 1e-6 + phase.simple_latency()) * plateau
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
    ring = _charge("ring", phase, hops, plateau_of(topo, size))
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
    return _charge("ring", phase, hops)


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
