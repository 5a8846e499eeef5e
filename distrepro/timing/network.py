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

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from distrepro.timing.capacities import PathCapacities

Resource = Hashable
#: a relative tolerance: a flow with less than this fraction of its volume left is finished
_EPS = 1e-12
#: how many classes of ended flows a network keeps for reuse
_IDLE_CLASSES = 1024


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
    are at most 64 classes. A resource missing from ``capacity`` is unlimited.
    """
    classes: dict[tuple[float, tuple[tuple[Resource, int], ...]], int] = {}
    for f in flows:
        sig = (f.cap, f.uses)
        classes[sig] = classes.get(sig, 0) + 1
    index: dict[Resource, int] = {}  # limited resource -> its position in _fill's lists
    limits = [tuple((index.setdefault(r, len(index)), w) for r, w in uses if r in capacity) for _, uses in classes]
    filled = _fill([cap for cap, _ in classes], list(classes.values()), limits, [capacity[r] for r in index])
    rates = dict(zip(classes, filled, strict=True))
    return {f.key: rates[(f.cap, f.uses)] for f in flows}


def _fill(
    caps: Sequence[float],
    counts: Sequence[int],
    limits: Sequence[Sequence[tuple[int, int]]],
    capacity: Sequence[float],
) -> list[float]:
    """Rates of classes by progressive filling: class i has ``counts[i]`` flows of cap ``caps[i]``, each
    using limited resource j ``w`` times for ``(j, w)`` in ``limits[i]``; resource j holds ``capacity[j]``.

    Why it is written this way: this runs at every flow event, and its results must stay bitwise those
    of the plain transcription (recompute every class's headroom and every resource's weight each round;
    the engine's virtual times depend on each bit, ``tests/test_network.py`` pins them). Every unfrozen
    class has risen by the same steps since 0, so one running ``level`` is each one's rate, the same sum
    in the same order; the tightest cap is the first unfrozen class in cap order (``cap - level`` rounds
    monotonically in ``cap``, so its minimum is ``min(cap) - level``); each resource's weight is reduced
    as its classes freeze, exactly, in integers; a class is visited when it freezes, not every round.
    Every other float operation (each ``left / weight``, ``left -= step * weight``, the tolerances) is
    the plain one, and no result depends on the order of classes or resources. Weights must be > 0.
    """
    rates = [0.0] * len(caps)
    order = sorted((i for i, cap in enumerate(caps) if cap > 0), key=caps.__getitem__)
    # resource j: left[j] the capacity not yet given out, weight[j] the sum of w * n over its unfrozen
    # users, users[j] every class using it; live: the resources with unfrozen users
    left = list(capacity)
    weight = [0] * len(capacity)
    users: dict[int, list[int]] = {}
    live = []
    for i in order:
        n = counts[i]
        for j, w in limits[i]:
            if weight[j]:
                weight[j] += w * n
                users[j].append(i)
            else:
                weight[j] = w * n
                users[j] = [i]
                live.append(j)
    frozen = [False] * len(caps)
    active = len(order)
    level = 0.0
    first = 0  # order[first] is the unfrozen class of smallest cap
    while active:
        while frozen[order[first]]:
            first += 1
        step = caps[order[first]] - level
        for j in live:
            x = left[j] / weight[j]
            if x < step:  # = min(step, x)
                step = x
        if step < 0.0:  # = max(step, 0.0)
            step = 0.0
        full = []
        for j in live:
            left[j] -= step * weight[j]
            if left[j] <= _EPS * capacity[j]:
                full.append(j)
        level += step
        newly = []
        k = first
        while k < len(order) and (frozen[order[k]] or not level < caps[order[k]] * (1 - _EPS)):  # cap reached
            if not frozen[order[k]]:
                frozen[order[k]] = True
                newly.append(order[k])
            k += 1
        for j in full:  # resource full
            for i in users[j]:
                if not frozen[i]:
                    frozen[i] = True
                    newly.append(i)
        if not newly:  # no progress possible (numerical corner): stop
            break
        active -= len(newly)
        for i in newly:
            rates[i] = level
            n = counts[i]
            for j, w in limits[i]:
                weight[j] -= w * n
        live = [j for j in live if weight[j]]
    for i in order:
        if not frozen[i]:
            rates[i] = level
    return rates


class _Class:
    """The flows in progress with one (cap, uses): they always share one rate (see :func:`max_min_rates`).

    ``rids``: the network's ids of every resource in ``uses``; ``limits``: (id, w) of the limited ones;
    ``solo``: the rate of one such flow alone in its component, once asked."""

    __slots__ = ("cap", "flows", "limits", "rate", "rids", "solo", "uses")

    def __init__(self, cap: float, uses: tuple[tuple[Resource, int], ...], net: FlowNetwork) -> None:
        self.cap, self.uses = cap, uses
        self.rids = tuple(net._rid(r) for r, _ in uses)
        self.limits = tuple((j, w) for j, (r, w) in zip(self.rids, uses, strict=True) if r in net.capacity)
        self.flows: dict[Hashable, Flow] = {}
        self.rate = float("nan")  # not rated yet: the first rating writes every member
        self.solo: float | None = None


class FlowNetwork:
    """Flows in progress on a set of resources, advanced through time by the caller.

    ``add`` and ``remove`` recompute the rates of the flows that share a resource with the changed
    flow, transitively (one connected component: flows elsewhere cannot be affected; after a removal,
    the components of all its former neighbours, in one filling). The caller keeps time monotone: it
    calls :meth:`advance` to the current event time before changing anything. ``capacity`` is copied
    at construction (a read-only :class:`PathCapacities` is kept) and fixed; a flow's cap and uses must not
    change while it is in the network.

    Why flows are kept in classes between events: the worst case (512 flows, 64 classes) spent most of
    each event regrouping flows by hashing their resource tuples and walking flows to find the
    component. Here a flow joins or leaves its class in O(1), resources are small integer ids, the
    component is walked over classes, the filling runs over classes (:func:`_fill`), and only the
    members of classes whose rate changed are written.
    """

    def __init__(self, capacity: Mapping[Resource, float] | None = None) -> None:
        # copied (a caller's dict may change), except a PathCapacities: read-only, and a copy would tabulate it
        self.capacity: Mapping[Resource, float] = (
            capacity if isinstance(capacity, PathCapacities) else dict(capacity or {})
        )
        self.flows: dict[Hashable, Flow] = {}
        self.now = 0.0
        self._classes: dict[tuple[float, tuple[tuple[Resource, int], ...]], _Class] = {}
        self._ids: dict[Resource, int] = {}  # resource -> id, for every resource ever used
        self._cap: list[float] = []  # id -> capacity (inf: unlimited, and then in no class's limits)
        self._users: list[dict[_Class, None]] = []  # id -> the classes using it
        #: classes whose flows have all ended, kept to be reused (a lockstep run ends and restarts the same
        #: pattern on every step); the oldest go beyond _IDLE_CLASSES
        self._idle: dict[tuple[float, tuple[tuple[Resource, int], ...]], _Class] = {}

    def _rid(self, r: Resource) -> int:
        j = self._ids.get(r)
        if j is None:
            j = self._ids[r] = len(self._cap)
            self._cap.append(self.capacity.get(r, float("inf")))
            self._users.append({})
        return j

    def advance(self, t: float) -> None:
        """Move every flow on by its rate up to time ``t``."""
        dt = t - self.now
        if dt > 0:
            for c in self._classes.values():
                moved = c.rate * dt  # the product each member's f.rate * dt would give
                for f in c.flows.values():
                    r = f.remaining - moved
                    f.remaining = r if r > 0.0 else 0.0  # = max(0.0, r)
            self.now = t

    def _component(self, seeds: Iterable[_Class]) -> list[_Class]:
        seen: dict[_Class, None] = {}
        done: set[int] = set()
        todo = list(seeds)
        while todo:
            c = todo.pop()
            if c in seen:
                continue
            seen[c] = None
            for j in c.rids:
                if j not in done:
                    done.add(j)
                    todo.extend(self._users[j])
        return list(seen)  # deterministic: dicts keep insertion order, and so does everything feeding them

    def _rerate(self, classes: Sequence[_Class]) -> None:
        rates = _fill([c.cap for c in classes], [len(c.flows) for c in classes], [c.limits for c in classes], self._cap)
        self._set_rates(classes, rates)

    @staticmethod
    def _set_rates(classes: Sequence[_Class], rates: Sequence[float]) -> None:
        for c, rate in zip(classes, rates, strict=True):
            if rate == c.rate:
                continue  # its members hold this rate already (and were marked contended by it if so)
            c.rate = rate
            if rate < c.cap * (1 - 1e-12):
                for f in c.flows.values():
                    f.rate = rate
                    f.contended = True
            else:
                for f in c.flows.values():
                    f.rate = rate

    def add(self, flow: Flow, t: float) -> None:
        """Start ``flow`` at ``t`` (>= the last event time); its key must not be in progress already."""
        if flow.key in self.flows:
            raise ValueError(f"a flow with key {flow.key!r} is already in progress")
        self.advance(t)
        flow.remaining = flow.volume
        flow.start_s = t
        self.flows[flow.key] = flow
        sig = (flow.cap, flow.uses)
        cls = self._classes.get(sig)
        if cls is None:
            cls = self._idle.pop(sig, None) or _Class(flow.cap, flow.uses, self)
            self._classes[sig] = cls
            for j in cls.rids:
                self._users[j][cls] = None
        cls.flows[flow.key] = flow
        known = cls.rate
        if len(cls.flows) == 1 and all(len(self._users[j]) == 1 for j in cls.rids):
            # alone in its component: the filling of one flow, computed once per class
            if cls.solo is None:
                cls.solo = _fill([cls.cap], [1], [cls.limits], self._cap)[0]
            self._set_rates((cls,), (cls.solo,))
        else:
            self._rerate(self._component([cls]))
        if cls.rate == known:  # the class kept its rate: the newcomer still needs it
            flow.rate = known
            if known < flow.cap * (1 - 1e-12):
                flow.contended = True

    def remove(self, key: Hashable) -> Flow:
        flow = self.flows.pop(key)
        sig = (flow.cap, flow.uses)
        cls = self._classes[sig]
        del cls.flows[key]
        if not cls.flows:
            del self._classes[sig]
            for j in cls.rids:
                del self._users[j][cls]
            cls.rate = float("nan")
            self._idle[sig] = cls
            if len(self._idle) > _IDLE_CLASSES:
                del self._idle[next(iter(self._idle))]
        seeds = [c for j in cls.rids for c in self._users[j]]
        if seeds:
            self._rerate(self._component(seeds))
        return flow

    def next_completion(self) -> tuple[float, Flow] | None:
        """The earliest (end time, flow); ties go to the flow added first."""
        best: Flow | None = None
        best_t = float("inf")
        now = self.now
        for f in self.flows.values():  # insertion order: the first of equal times wins
            # Flow.eta inlined (this loop runs over every flow at every event)
            rem, vol = f.remaining, f.volume
            if rem <= _EPS * (1.0 if vol < 1.0 else vol):  # = max(vol, 1.0)
                t = now
            elif f.contended:
                t = now + rem / f.rate
            else:
                t = f.start_s + vol / f.cap
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

    def __init__(
        self, profile
    ) -> None:  # HardwareProfile (not imported: distrepro.hardware.profiles imports nothing of ours)
        self.profile = profile
        #: the NICs and every intra-node link, each link's capacity computed when first asked (a node of n devices
        #: has n(n-1) links: never tabulated); the flow network keeps this read-only mapping as it is
        self.capacity: PathCapacities = PathCapacities(profile)
        self._cache: dict[tuple[tuple[int, int], ...], tuple[float, tuple[tuple[Resource, int], ...]]] = {}

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
            for key in keys:
                uses[key] = uses.get(key, 0) + 1
        out = (cap, tuple(uses.items()))
        self._cache[hops] = out
        return out
