"""In-memory implementation of :class:`distrepro.api.method.Comm` for the in-process engine.

Each call parks the worker (see :mod:`distrepro.engine.inprocess.scheduler`) with a request; requests are
handled in virtual-time order. A collective starts when its last member arrives
(``start = max(arrival times)``), costs what the profile's alpha-beta model says for its pattern
and ends for everyone at ``start + cost``; earlier arrivals record the wait as idle time.
Non-blocking operations return a :class:`InProcessWork` that completes at a definite virtual
time, so communication overlapped with computation costs only what is not hidden. They follow
``torch.distributed``'s semantics, as the distributed engine does: the inputs are taken when the
operation is issued (copied), and the results land in the caller's tensors at ``wait()``.

Reductions are summed in rank order, so results do not depend on who arrived first. A collective issued from a
gradient bucket's callback is charged as the emulated bucket (``bucket_charge``, :mod:`distrepro.api.overlap`), read
when it is issued.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from distrepro.api.gossip import GossipEndpoint
from distrepro.api.method import Comm, Group, ReduceOp
from distrepro.api.overlap import BucketCharge, counted
from distrepro.engine.comm_args import one_tensor, tensor_list
from distrepro.engine.inprocess.agent import AgentHub, InProcessAgent
from distrepro.engine.inprocess.lanes import InProcessWork, Lanes, Op
from distrepro.engine.inprocess.p2p import ControlRequest, EventRequest, ExchangeRequest, PairRequest
from distrepro.engine.inprocess.scheduler import Request, Scheduler
from distrepro.engine.inprocess.staging import flat as _flat
from distrepro.engine.inprocess.staging import reduce as _reduce
from distrepro.engine.inprocess.staging import stage as _stage
from distrepro.engine.inprocess.staging import unflat_into as _unflat_into
from distrepro.errors import CommError
from distrepro.timing import charges
from distrepro.timing.charges import payload_bytes
from distrepro.timing.network import Paths
from distrepro.timing.timemodel import CommCostModel

#: collectives priced by :meth:`distrepro.timing.timemodel.CommCostModel.collective` (the call's algorithm
#: decides its hops)
_PATTERN = {
    "all_reduce": "all_reduce",
    "weighted_average": "all_reduce",
    "reduce_scatter": "reduce_scatter",
    "all_gather": "all_gather",
    "broadcast": "broadcast",
}


def _shape(
    fab: Fabric, kind: str, ranks: tuple[int, ...], extra: Any, size: float
) -> tuple[float, tuple[tuple[int, int], ...]]:
    """(latency part of the charge, hops its data moves over); no hops = a fixed-time operation.

    The latency part and the hops are those of the algorithm and protocol the cost model chose for this call's
    ``size`` (charged bytes: all-gather per rank), so ``cost − latency`` is its bandwidth term. The parameter
    server's charge is a max of two paths and control traffic is latency only: both are charged as fixed times
    that share no bandwidth (the server link's serialisation is in the formula).
    """
    if kind == "charge":
        kind = extra[0] if extra[0] != "parameter_server" else "ps_sync"
    pattern = _PATTERN.get(kind)
    if pattern is None:
        return 0.0, ()
    src = extra if kind == "broadcast" else None
    how = fab.cost.collective(pattern, ranks, size / fab.cost.bytes_scale, src=src)
    return how.latency_s, how.hops


# -------------------------------------------------------------------------- collectives


@dataclass
class _Arrival:
    time_s: float
    tensors: list[torch.Tensor]
    extra: Any
    work: InProcessWork | None
    #: the emulated bucket its issuer's callback charges it as (None: its payload, scaled)
    bucket: BucketCharge | None = None


@dataclass
class _Pending:
    kind: str
    ranks: tuple[int, ...]
    arrivals: dict[int, _Arrival] = field(default_factory=dict)


# A collective's behaviour: (fabric, ranks, arrivals) -> (cost seconds, per-rank results, per-rank bytes)
Behaviour = Callable[["Fabric", tuple[int, ...], dict[int, _Arrival]], tuple[float, dict[int, Any], int, float]]


class _CollectiveRequest(Request):
    """A collective call; built on the caller's stack, so a non-blocking one copies its tensors here,
    at issue (``outputs``: how many leading tensors receive results, all of them when None)."""

    def __init__(
        self,
        kind: str,
        ranks: tuple[int, ...],
        tensors: list[torch.Tensor],
        extra: Any,
        async_op: bool,
        behaviour: Behaviour,
        fabric: Fabric,
        outputs: int | None = None,
        bucket: BucketCharge | None = None,
    ) -> None:
        self.kind, self.ranks, self.extra, self.bucket = kind, ranks, extra, bucket
        self.async_op, self.behaviour, self.fabric = async_op, behaviour, fabric
        self.work: InProcessWork | None = None
        self.results: list[tuple[torch.Tensor, torch.Tensor]] = []
        if async_op:
            staged = _stage(tensors)
            self.results = list(zip(staged, tensors, strict=True))[:outputs]
            tensors = staged
        self.tensors = tensors

    def describe(self) -> str:
        return f"{self.kind} over ranks {list(self.ranks)}"

    def handle(self, sched: Scheduler) -> None:
        fab = self.fabric
        seq = fab.next_seq(self.rank, self.ranks)
        key = (self.ranks, seq)
        pending = fab.pending.setdefault(key, _Pending(self.kind, self.ranks))
        if pending.kind != self.kind:
            raise CommError(
                f"collective mismatch on ranks {list(self.ranks)} (call #{seq}): rank {self.rank} called "
                f"{self.kind} while others called {pending.kind}"
            )
        if self.async_op:
            clock = sched.clocks[self.rank]
            self.work = InProcessWork(fab.comms[self.rank], issue_s=clock.t, results=self.results)
            self.work.backward = clock.backward_tag()  # a group collective: it contends with backward
        pending.arrivals[self.rank] = _Arrival(
            sched.clocks[self.rank].t, self.tensors, self.extra, self.work, self.bucket
        )
        if self.async_op:
            sched.resolve(self.rank, self.work)
        if len(pending.arrivals) < len(self.ranks):
            return
        del fab.pending[key]
        start = max(a.time_s for a in pending.arrivals.values())
        cost, results, nbytes, size = self.behaviour(fab, self.ranks, pending.arrivals)
        for r in self.ranks:
            fab.count_bytes(r, nbytes)
        latency, hops = _shape(fab, self.kind, self.ranks, self.extra, size)
        members = {r: pending.arrivals[r].work for r in self.ranks}
        fab.lanes.submit(Op(("g", self.ranks), start, cost, min(latency, cost), hops, members, results))


def _all_reduce_behaviour(fab: Fabric, ranks: tuple[int, ...], arr: dict[int, _Arrival]):
    op: ReduceOp = arr[ranks[0]].extra
    flats = [_flat(arr[r].tensors) for r in ranks]
    total = _reduce(flats, op)
    for r in ranks:
        _unflat_into(total, arr[r].tensors)
    size = fab.charged(payload_bytes(arr[ranks[0]].tensors), arr[ranks[0]].bucket)
    seconds, sent = charges.all_reduce(fab.cost, ranks, size)
    return seconds, {}, sent, size


def _weighted_behaviour(fab: Fabric, ranks: tuple[int, ...], arr: dict[int, _Arrival], pattern: str):
    weights = [float(arr[r].extra) for r in ranks]
    wsum = sum(weights)
    if wsum <= 0:
        raise CommError(f"weighted average over ranks {list(ranks)} with total weight {wsum}")
    total = _flat(arr[ranks[0]].tensors) * weights[0]
    scaled = torch.empty_like(total)  # one buffer for every w·x (the same arithmetic as w·x per rank)
    for r, w in zip(ranks[1:], weights[1:], strict=True):
        torch.mul(_flat(arr[r].tensors), w, out=scaled)
        total.add_(scaled)
    total /= wsum
    for r in ranks:
        _unflat_into(total, arr[r].tensors)
    size = fab.charged(payload_bytes(arr[ranks[0]].tensors), arr[ranks[0]].bucket, 4)  # + the scalar weight
    if pattern == "ps":
        seconds, sent = charges.parameter_server(fab.cost, ranks, size)
    elif pattern == "ps_async":
        arrivals = [arr[r].time_s for r in ranks]
        seconds, sent = charges.parameter_server_async(fab.cost, ranks, size, arrivals)
    else:
        seconds, sent = charges.all_reduce(fab.cost, ranks, size)
    return seconds, {}, sent, size


def _broadcast_behaviour(fab: Fabric, ranks: tuple[int, ...], arr: dict[int, _Arrival]):
    src: int = arr[ranks[0]].extra
    if any(arr[r].extra != src for r in ranks):
        raise CommError(f"broadcast on ranks {list(ranks)}: members disagree on src")
    data = _flat(arr[src].tensors)
    for r in ranks:
        if r != src:
            _unflat_into(data, arr[r].tensors)
    size = fab.charged(payload_bytes(arr[src].tensors), arr[src].bucket)
    seconds, sent = charges.broadcast(fab.cost, ranks, src, size)
    return seconds, {}, sent, size


def _reduce_scatter_behaviour(fab: Fabric, ranks: tuple[int, ...], arr: dict[int, _Arrival]):
    op: ReduceOp = arr[ranks[0]].extra
    inputs = [arr[r].tensors[1].detach().reshape(-1) for r in ranks]
    p, total = len(ranks), inputs[0].numel()
    if any(t.numel() != total for t in inputs) or total % p:
        raise CommError(f"reduce_scatter over ranks {list(ranks)}: inputs must be 1-D, equal and divisible by {p}")
    m = total // p
    reduced = _reduce(inputs, op)
    for i, r in enumerate(ranks):
        out = arr[r].tensors[0]
        if out.numel() != m:
            raise CommError(f"reduce_scatter: rank {r}'s output has {out.numel()} elements, expected {m}")
        out.copy_(reduced[i * m : (i + 1) * m].view_as(out))
    size = fab.charged(payload_bytes([arr[ranks[0]].tensors[1]]), arr[ranks[0]].bucket)
    seconds, sent = charges.reduce_scatter(fab.cost, ranks, size)
    return seconds, {}, sent, size


def _all_gather_behaviour(fab: Fabric, ranks: tuple[int, ...], arr: dict[int, _Arrival]):
    pieces = [arr[r].tensors[1].detach().reshape(-1) for r in ranks]
    m = pieces[0].numel()
    if any(t.numel() != m for t in pieces):
        raise CommError(f"all_gather over ranks {list(ranks)}: inputs differ in size")
    gathered = torch.cat(pieces)
    for r in ranks:
        out = arr[r].tensors[0]
        if out.numel() != gathered.numel():
            raise CommError(f"all_gather: rank {r}'s output has {out.numel()} elements, expected {gathered.numel()}")
        out.copy_(gathered.view_as(out))
    size = fab.charged(payload_bytes([arr[ranks[0]].tensors[1]]), arr[ranks[0]].bucket)
    seconds, sent = charges.all_gather(fab.cost, ranks, size)
    return seconds, {}, sent, size


def _charge_behaviour(fab: Fabric, ranks: tuple[int, ...], arr: dict[int, _Arrival]):
    pattern, nbytes = arr[ranks[0]].extra
    if any(arr[r].extra != (pattern, nbytes) for r in ranks):
        raise CommError(f"charge over ranks {list(ranks)}: members disagree on pattern or bytes")
    size = fab.charged(nbytes)
    seconds, sent = charges.by_pattern(fab.cost, pattern, ranks, size)
    return seconds, {}, sent, size / len(ranks) if pattern == "all_gather" else size


def _gather_object_behaviour(fab: Fabric, ranks: tuple[int, ...], arr: dict[int, _Arrival]):
    objs = [arr[r].extra for r in ranks]
    seconds, sent = charges.control(fab.cost, ranks)
    return seconds, {r: list(objs) for r in ranks}, sent, 0.0


def _barrier_behaviour(fab: Fabric, ranks: tuple[int, ...], arr: dict[int, _Arrival]):
    seconds, sent = charges.control(fab.cost, ranks)
    return seconds, {}, sent, 0.0


# -------------------------------------------------------------------------- fabric and comm


class Fabric:
    """Shared state of the in-process network: matching of calls, byte counts, the cost model."""

    def __init__(self, sched: Scheduler, cost: CommCostModel, bytes_scale: float = 1.0) -> None:
        self.sched = sched
        self.cost = cost
        self.bytes_scale = bytes_scale
        self.world_size = sched.world_size
        self.pending: dict[tuple[Any, int], _Pending] = {}
        self.exchanges: dict[tuple[Any, int], tuple[ExchangeRequest, float]] = {}
        self.pair_waiting: dict[int, PairRequest] = {}
        self.control_arrivals: dict[int, Any] = {}
        self._seqs: dict[tuple[int, Any], int] = {}
        self.bytes_sent = [0] * self.world_size  # whole bytes: charges.py rounds each message
        self.lanes = Lanes(sched, Paths(cost.profile))
        #: every rank, once: each worker's default group (K copies of it were K² ints at set-up)
        self.world = tuple(range(self.world_size))
        self.comms = [InProcessComm(self, r) for r in range(self.world_size)]
        self.agents = AgentHub(self)

    def next_seq(self, rank: int, key: Any) -> int:
        n = self._seqs.get((rank, key), 0)
        self._seqs[(rank, key)] = n + 1
        return n

    def charged(self, nbytes: float, bucket: BucketCharge | None = None, extra: float = 0.0) -> float:
        """Bytes charged to the clock: the real payload (as the emulated ``bucket`` it was issued in counts it) plus
        ``extra`` bytes outside it (a weight), scaled to the emulated workload."""
        return (counted(nbytes, bucket) + extra) * self.bytes_scale

    def count_bytes(self, rank: int, nbytes: int) -> None:
        self.bytes_sent[rank] += nbytes


class InProcessComm(Comm):
    """One worker's view of the in-process fabric."""

    #: set by the harness around a gradient bucket's callback (:func:`distrepro.api.overlap.charged_as`)
    bucket_charge: BucketCharge | None = None

    def __init__(self, fabric: Fabric, rank: int) -> None:
        self.fabric = fabric
        self.rank = rank
        self.world_size = fabric.world_size
        self._world = fabric.world

    def _call(self, req: Request) -> Any:
        return self.fabric.sched.call(self.rank, req)

    def _ranks(self, group: Group | None) -> tuple[int, ...]:
        if group is None:
            return self._world  # every rank is in it: no search through K ranks at every call
        ranks = group.ranks
        if self.rank not in ranks:
            raise CommError(f"rank {self.rank} is not a member of group {list(ranks)}")
        return ranks

    def _collective(self, kind, tensors, group, async_op, extra, behaviour, outputs=None):
        req = _CollectiveRequest(
            kind,
            self._ranks(group),
            list(tensors),
            extra,
            async_op,
            behaviour,
            self.fabric,
            outputs,
            self.bucket_charge,
        )
        return self._call(req)

    def all_reduce(self, tensor, op: ReduceOp = "sum", group=None, async_op=False):
        tensors = [one_tensor("all_reduce", tensor)]
        return self._collective("all_reduce", tensors, group, async_op, op, _all_reduce_behaviour)

    def all_reduce_coalesced(self, tensors, op: ReduceOp = "sum", group=None, async_op=False):
        tensors = tensor_list("all_reduce_coalesced", tensors)
        return self._collective("all_reduce", tensors, group, async_op, op, _all_reduce_behaviour)

    def weighted_average(self, tensors, weight, group=None, async_op=False):
        def behaviour(fab, ranks, arr):
            return _weighted_behaviour(fab, ranks, arr, "ring")

        tensors = tensor_list("weighted_average", tensors)
        return self._collective("weighted_average", tensors, group, async_op, float(weight), behaviour)

    def broadcast(self, tensor, src, group=None, async_op=False):
        tensors = [one_tensor("broadcast", tensor)]
        return self._collective("broadcast", tensors, group, async_op, int(src), _broadcast_behaviour)

    def reduce_scatter(self, output, input, op: ReduceOp = "sum", group=None, async_op=False):
        return self._collective("reduce_scatter", [output, input], group, async_op, op, _reduce_scatter_behaviour, 1)

    def all_gather(self, output, input, group=None, async_op=False):
        return self._collective("all_gather", [output, input], group, async_op, None, _all_gather_behaviour, 1)

    def charge(self, pattern: str, nbytes: float, group: Group | None = None, async_op: bool = False):
        if pattern not in charges.PATTERNS:
            raise ValueError(f"unknown charge pattern {pattern!r}; expected one of {', '.join(charges.PATTERNS)}")
        return self._collective("charge", [], group, async_op, (pattern, float(nbytes)), _charge_behaviour)

    def all_gather_object(self, obj, group=None):
        return self._collective("all_gather_object", [], group, False, obj, _gather_object_behaviour)

    def barrier(self, group=None) -> None:
        self._collective("barrier", [], group, False, None, _barrier_behaviour)

    def new_group(self, ranks: Sequence[int]) -> Group:
        ranks_t = tuple(int(r) for r in ranks)
        if len(set(ranks_t)) != len(ranks_t) or any(not 0 <= r < self.world_size for r in ranks_t):
            raise ValueError(f"invalid group ranks {list(ranks_t)} for world size {self.world_size}")
        return Group(ranks_t)

    def exchange(self, peer: int, tensor: torch.Tensor, async_op: bool = False):
        if peer == self.rank or not 0 <= peer < self.world_size:
            raise ValueError(f"rank {self.rank}: invalid exchange peer {peer}")
        return self._call(ExchangeRequest(self.fabric, peer, tensor, async_op))

    def pair(self, neighbors: Sequence[int], async_op: bool = False):
        return self._call(PairRequest(self.fabric, neighbors, async_op))

    def gossip_agent(self, neighbors: Sequence[int], endpoint: GossipEndpoint) -> InProcessAgent:
        return self.fabric.agents.create(self.rank, neighbors, endpoint)

    def ps_sync(self, tensors, weight, group=None, receive="collective") -> None:
        def behaviour(fab, ranks, arr):
            return _weighted_behaviour(fab, ranks, arr, "ps_async" if receive == "async" else "ps")

        self._collective("ps_sync", tensors, group, False, float(weight), behaviour)

    @property
    def bytes_sent(self) -> int:
        return int(self.fabric.bytes_sent[self.rank])

    def state_dict(self) -> dict[str, Any]:
        """This rank's byte count (as :meth:`distrepro.engine.multiprocess.comm.DistComm.state_dict`)."""
        return {"bytes": self.bytes_sent}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.fabric.bytes_sent[self.rank] = int(state["bytes"])

    # engine-only hooks (not part of the method API) ---------------------------------
    def control(self, payload: Any, on_complete: Callable[[dict[int, Any]], Any]) -> Any:
        return self._call(ControlRequest(self.fabric, payload, on_complete))

    def event(self, fn: Callable[[], Any], label: str) -> Any:
        return self._call(EventRequest(fn, label))
