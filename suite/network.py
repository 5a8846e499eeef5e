"""Bandwidth sharing between concurrent flows: max-min fairness by progressive filling.

Why a sharing rule at all: with a fixed alpha-beta charge per call, four concurrent 1 GB all-reduces on a
1 GB/s link each finished at 1 s, as if each had the link to itself, and four GPUs of one node gossiping
across nodes each saw the whole NIC. Real transports (TCP, RoCE, NCCL channels on one NIC) share a
bottleneck roughly fairly between the flows crossing it; the standard fluid model of that is **max-min
fairness** (Bertsekas & Gallager, *Data Networks*, 2nd ed. 1992, §6.5.2), the rule SimGrid's network model
is built on (Velho et al., "On the validity of flow-level TCP network models for grid and cloud
simulations", ACM TOMACS 23(4), 2013).

The rule, exactly: every *resource* (a node's NIC in one direction, an intra-node link in one direction)
has a capacity in bytes/s; every *flow* has a rate cap (its own path's bandwidth, as the alpha-beta model
charges it alone) and uses some resources, each ``weight`` times (a ring crossing one NIC twice uses it
twice). Progressive filling: raise every unfrozen flow's rate together; when a resource is full, freeze
the flows through it; when a flow reaches its cap, freeze it; repeat until all are frozen. Rates are
recomputed whenever a flow starts or ends, and between those events each flow moves ``rate`` bytes/s.

Everything here is a pure function of the flows added (in order) and the times given, so the
in-process engine, which feeds it in virtual-time order, gets the same schedule on every machine.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

Resource = Hashable
#: a relative tolerance: a flow with less than this fraction of its volume left is finished
_EPS = 1e-12


@dataclass
class Flow:
    """One transfer in progress: ``volume`` bytes at up to ``cap`` bytes/s through ``uses``."""

    key: Hashable
    volume: float
    cap: float
    uses: tuple[tuple[Resource, int], ...]
    start_s: float
    remaining: float = 0.0
    rate: float = 0.0
    #: whether the flow ever ran below its cap (if not, it ends exactly at start + volume / cap)
    contended: bool = False
    extra: object = field(default=None, repr=False)

    def eta(self, now: float) -> float:
        """When it ends at its current rate."""
        if self.remaining <= _EPS * max(self.volume, 1.0):
            return now
        if not self.contended:
            return self.start_s + self.volume / self.cap
        return now + self.remaining / self.rate


def max_min_rates(flows: Sequence[Flow], capacity: Mapping[Resource, float]) -> dict[Hashable, float]:
    """Max-min fair rates of ``flows`` (progressive filling; see the module docstring).

    Flows with the same cap and resources are interchangeable and get the same rate, so the filling runs
    over classes of them (a class of n flows weighs n times on each resource): 512 flows between 8 nodes
    are at most 64 classes. Deterministic: classes are visited in first-seen order, so equal inputs give
    bitwise equal rates. A resource missing from ``capacity`` is unlimited.
    """
    classes: dict[tuple[float, tuple[tuple[Resource, int], ...]], int] = {}
    for f in flows:
        sig = (f.cap, f.uses)
        classes[sig] = classes.get(sig, 0) + 1
    rate = dict.fromkeys(classes, 0.0)
    active = [sig for sig in classes if sig[0] > 0]
    left = {r: capacity[r] for sig in classes for r, _ in sig[1] if r in capacity}
    while active:
        weight: dict[Resource, int] = {}
        for sig in active:
            n = classes[sig]
            for r, w in sig[1]:
                if r in left:
                    weight[r] = weight.get(r, 0) + w * n
        step = min(sig[0] - rate[sig] for sig in active)
        for r, w in weight.items():
            step = min(step, left[r] / w)
        step = max(step, 0.0)
        full: set[Resource] = set()
        for r, w in weight.items():
            left[r] -= step * w
            if left[r] <= _EPS * capacity[r]:
                full.add(r)
        still = []
        for sig in active:
            rate[sig] += step
            if rate[sig] < sig[0] * (1 - _EPS) and not any(r in full for r, _ in sig[1]):
                still.append(sig)
        if len(still) == len(active):  # no progress possible (numerical corner): stop
            break
        active = still
    return {f.key: rate[(f.cap, f.uses)] for f in flows}


class FlowNetwork:
    """Flows in progress on a set of resources, advanced through time by the caller.

    ``add`` and ``remove`` recompute the rates of the flows that share a resource with the changed
    flow, transitively (one connected component: flows elsewhere cannot be affected). The caller
    keeps time monotone: it calls :meth:`advance` to the current event time before changing anything.
    """

    def __init__(self, capacity: Mapping[Resource, float] | None = None) -> None:
        self.capacity: dict[Resource, float] = dict(capacity or {})
        self.flows: dict[Hashable, Flow] = {}
        self.now = 0.0
        self._users: dict[Resource, dict[Hashable, None]] = {}

    def advance(self, t: float) -> None:
        """Move every flow on by its rate up to time ``t``."""
        dt = t - self.now
        if dt > 0:
            for f in self.flows.values():
                f.remaining = max(0.0, f.remaining - f.rate * dt)
            self.now = t

    def _component(self, seeds: Sequence[Flow]) -> list[Flow]:
        seen: dict[Hashable, Flow] = {}
        done: set[Resource] = set()
        todo = [f for f in seeds if f.key in self.flows]
        while todo:
            f = todo.pop()
            if f.key in seen:
                continue
            seen[f.key] = f
            for r, _ in f.uses:
                if r not in done:
                    done.add(r)
                    todo.extend(self.flows[k] for k in self._users.get(r, ()) if k not in seen)
        return list(seen.values())  # deterministic: dicts keep insertion order, and so does everything feeding them

    def _rerate(self, flows: Sequence[Flow]) -> None:
        rates = max_min_rates(flows, self.capacity)
        for f in flows:
            f.rate = rates[f.key]
            if f.rate < f.cap * (1 - 1e-12):
                f.contended = True

    def add(self, flow: Flow, t: float) -> None:
        """Start ``flow`` at ``t`` (>= the last event time)."""
        self.advance(t)
        flow.remaining = flow.volume
        flow.start_s = t
        self.flows[flow.key] = flow
        neighbours = [self.flows[k] for r, _ in flow.uses for k in self._users.get(r, ())]
        for r, _ in flow.uses:
            self._users.setdefault(r, {})[flow.key] = None
        self._rerate(self._component([flow, *neighbours]))

    def remove(self, key: Hashable) -> Flow:
        flow = self.flows.pop(key)
        neighbours: list[Flow] = []
        for r, _ in flow.uses:
            users = self._users.get(r, {})
            users.pop(key, None)
            neighbours.extend(self.flows[k] for k in users)
        if neighbours:
            self._rerate(self._component(neighbours))
        return flow

    def next_completion(self) -> tuple[float, Flow] | None:
        """The earliest (end time, flow); ties go to the flow added first."""
        best: Flow | None = None
        best_t = float("inf")
        now = self.now
        for f in self.flows.values():  # insertion order: the first of equal times wins
            t = f.eta(now)
            if t < best_t:
                best, best_t = f, t
        return None if best is None else (best_t, best)


def simulate(flows: Sequence[tuple[float, float, float, Sequence[tuple[Resource, int]]]], capacity) -> list[float]:
    """End times of ``(start_s, volume, cap, uses)`` flows (a reference for tests and benchmarks)."""
    net = FlowNetwork(capacity)
    order = sorted(range(len(flows)), key=lambda i: (flows[i][0], i))
    ends = [0.0] * len(flows)
    pending = list(order)
    while pending or net.flows:
        nxt = net.next_completion()
        if pending and (nxt is None or flows[pending[0]][0] < nxt[0]):
            i = pending.pop(0)
            start, volume, cap, uses = flows[i]
            net.add(Flow(i, volume, cap, tuple(uses), start), start)
            continue
        assert nxt is not None
        t, f = nxt
        net.advance(t)
        net.remove(f.key)
        ends[int(f.key)] = t  # type: ignore[call-overload]
    return ends


class Paths:
    """Which resources a communication pattern's hops use on a profile, and their capacities.

    Resources: ``("tx", node)`` / ``("rx", node)``, the node's one NIC in each direction (its ``nic``, else
    ``network.inter_node``), used by every hop that leaves / enters the node; ``("link", a, b)``, the
    intra-node link from rank a to rank b. A flow's own cap is its slowest hop (the alpha-beta charge's
    bandwidth), so a flow alone runs exactly as it is charged alone.
    """

    def __init__(self, profile) -> None:  # HardwareProfile (not imported: suite.profiles imports nothing of ours)
        self.profile = profile
        self.capacity: dict[Resource, float] = {}
        self._cache: dict[tuple[tuple[int, int], ...], tuple[float, tuple[tuple[Resource, int], ...]]] = {}
        inter = profile.network.inter_node.bandwidth_gbytes_per_s
        for i in range(len(profile.nodes)):
            nic = profile.node_nic(i)
            bw = (nic.bandwidth_gbytes_per_s if nic is not None else inter) * 1e9
            self.capacity[("tx", i)] = bw
            self.capacity[("rx", i)] = bw

    def of(self, hops: tuple[tuple[int, int], ...]) -> tuple[float, tuple[tuple[Resource, int], ...]]:
        """(cap in bytes/s, resources with weights) of a pattern moving data over ``hops``."""
        cached = self._cache.get(hops)
        if cached is not None:
            return cached
        prof = self.profile
        uses: dict[Resource, int] = {}
        cap = float("inf")
        for a, b in hops:
            link = prof.link(a, b)
            cap = min(cap, link.bandwidth_bytes_per_s)
            na, nb = prof.node_index(a), prof.node_index(b)
            keys: list[Resource] = [("tx", na), ("rx", nb)] if na != nb else [("link", a, b)]
            if na == nb:
                self.capacity.setdefault(("link", a, b), link.bandwidth_bytes_per_s)
            for key in keys:
                uses[key] = uses.get(key, 0) + 1
        out = (cap, tuple(uses.items()))
        self._cache[hops] = out
        return out


def ring_hops(ranks: Sequence[int]) -> tuple[tuple[int, int], ...]:
    p = len(ranks)
    return tuple((ranks[i], ranks[(i + 1) % p]) for i in range(p)) if p > 1 else ()


def tree_hops(ranks: Sequence[int], src: int) -> tuple[tuple[int, int], ...]:
    """The binomial tree :meth:`suite.timemodel.CommCostModel.broadcast` charges."""
    group = tuple(ranks)
    p = len(group)
    if p <= 1:
        return ()
    start = group.index(src)
    order = group[start:] + group[:start]
    levels = (p - 1).bit_length()
    return tuple((order[i], order[i + (1 << k)]) for k in range(levels) for i in range(1 << k) if i + (1 << k) < p)
