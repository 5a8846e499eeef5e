"""``Comm`` over ``torch.distributed``: the same method code on real processes.

Every call does the real collective (gloo on CPU, NCCL on GPU) *and* advances the rank's
virtual clock exactly as the in-process engine does (:mod:`distrepro.timing.charges`). To agree on
when a collective starts (the last member's arrival) without an extra round trip, each member
packs its virtual clock into the payload: a one-hot slot per member, split into a float32
high part and the remainder so the sum reproduces float64 clocks to ~1e-12 s. Summing one-hot
slots (or taking their max) yields every member's clock, hence ``start = max``.

Non-blocking calls follow ``torch.distributed`` (and the in-process engine): inputs are copied
into the wire buffer at issue, results are written into the caller's tensors at ``wait()``.
Point-to-point exchanges append the clock to the vector (:mod:`distrepro.engine.multiprocess.peer`). Gossip pairing
goes through a coordinator thread on rank 0 that talks over the c10d store
(:mod:`distrepro.engine.multiprocess.pairing`); a gossip agent (:mod:`distrepro.engine.multiprocess.agent`)
exchanges on a process group of its own, from its own thread.
CUDA tensors are staged through CPU memory when the backend is gloo (gloo does not carry CUDA
tensors for send/recv). Every wait has the process group's timeout.

**Concurrent traffic is charged as if each flow were alone.** The dist engine charges every operation
the profile's alpha-beta cost on its own links, after the previous operation on its lane (its group,
or its pair), and nothing else: there is no NIC sharing between concurrent flows of different lanes,
within a process or across processes (a rank cannot know, without a global exchange per operation,
what the other ranks have on a shared NIC). Where flows do overlap on a link (several groups or
pairs through one node's NIC at once), its emulated times are therefore a **lower bound**; the
in-process engine shares each NIC max-min fairly between the flows crossing it
(:mod:`distrepro.timing.network`, :mod:`distrepro.engine.inprocess.lanes`). Timing claims that depend on contention
are to be decided on the in-process engine; the two engines' clocks agree exactly only when no two
flows share a link at the same time (e.g. every lockstep method on one lane per step).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist

from distrepro.api.method import Comm, Group, ReduceOp
from distrepro.api.overlap import BucketCharge, counted
from distrepro.engine.clock import VirtualClock
from distrepro.engine.comm_args import one_tensor, tensor_list
from distrepro.engine.multiprocess.pairing import PairingClient
from distrepro.engine.multiprocess.peer import PeerOps
from distrepro.engine.multiprocess.work import DistWork, clock_slots, clocks_from, nbytes_of, returned
from distrepro.errors import CommError
from distrepro.timing import charges
from distrepro.timing.timemodel import CommCostModel

Pace = Callable[[float], None]


class DistComm(PeerOps, Comm):
    #: set by the harness around a gradient bucket's callback (:func:`distrepro.api.overlap.charged_as`): a collective
    #: issued then is charged as the emulated bucket, as in-process
    bucket_charge: BucketCharge | None = None

    def __init__(
        self,
        rank: int,
        world_size: int,
        clock: VirtualClock,
        cost: CommCostModel,
        bytes_scale: float = 1.0,
        device: torch.device | None = None,
        pairing: PairingClient | None = None,
        pace: Pace | None = None,
        group: Any = None,
        timeout: Any = None,
        gossip_group: Any = None,
    ) -> None:
        self.rank, self.world_size = rank, world_size
        self.clock, self.cost, self.bytes_scale = clock, cost, bytes_scale
        self.device = device or torch.device("cpu")
        self.stage_cpu = dist.get_backend() == "gloo"
        #: where collective buffers live: CPU for gloo (it carries no CUDA send/recv), else the device
        self.wire_device = torch.device("cpu") if self.stage_cpu else self.device
        self.pairing = pairing
        self.pace = pace
        self._bytes = 0  # whole bytes: charges.py rounds each message, as in-process
        self._world = Group(tuple(range(world_size)), group)
        self.timeout = timeout
        self.gossip_group = gossip_group  # the gossip agent's own process group (asynchronous methods)
        self.comm_wall_s = 0.0
        self._lanes: dict[Any, DistWork] = {}  # the last unresolved operation of each lane
        self._capture: list[tuple[float, float, int]] | None = None

    # ------------------------------------------------------------------ helpers
    def _group(self, group: Group | None) -> Group:
        g = group or self._world
        if self.rank not in g.ranks:
            raise CommError(f"rank {self.rank} is not a member of group {list(g.ranks)}")
        return g

    def _to_wire(self, t: torch.Tensor) -> torch.Tensor:
        return t.cpu() if self.stage_cpu else t.to(self.device)

    def _finish(self, start: float, seconds: float, sent: int, lane: Any = None) -> None:
        """An operation's timing: captured by the :class:`DistWork` being resolved, else applied now
        (a blocking call outside a handle), after the previous operation on its lane."""
        if self._capture is not None:
            self._capture.append((start, seconds, sent))
            return
        prev = self._lanes.pop(lane, None) if lane is not None else None
        if prev is not None:
            prev.resolve()
            start = max(start, prev.end_s)
        self._apply(start, start + seconds, sent)

    def _issued(self, charge: charges.Charge) -> tuple[float, int]:
        """A call's charge, taken when it is issued: its bytes count from then on.

        The in-process engine counts a collective once its members have arrived, so a non-blocking call still in
        flight at an evaluation (Decent-DP overlaps each round with the next step) must count here too. The seconds
        wait for ``wait()``, and ``_finish`` then gets no bytes. Link noise is keyed per pattern and group, so the
        earlier draw is the same draw."""
        seconds, sent = charge
        self._bytes += sent
        return seconds, 0

    def _apply(self, start: float, end: float, sent: int, backward: int | None = None, issue_s: float = 0.0) -> None:
        self._bytes += sent
        self.clock.finish_op(start, end, backward, issue_s)
        if self.pace is not None:
            self.pace(self.clock.t)

    def _packed_collective(
        self,
        tensors: Sequence[torch.Tensor],
        group: Group | None,
        async_op: bool,
        mode: str,
        charge: Callable[[tuple[int, ...], float], charges.Charge],
        weight: float | None = None,
        extra_bytes: float = 0,
        payload: float | None = None,
        bucketed: bool = True,
    ) -> DistWork | None:
        """One all-reduce of ``[tensors…, (weight), clock slots]`` in a preallocated buffer.

        ``mode``: sum | mean | max | min | weighted. Scaling (weight, negation for MIN-as-MAX) is
        fused into the copy in and the division into the copy out: two passes over the data. Charged: ``payload``
        bytes (the tensors' by default), as the current bucket counts them (``bucket_charge``; not a bare
        ``charge``, whose bytes are explicit), plus ``extra_bytes``, times ``bytes_scale``.
        """
        g = self._group(group)
        p = len(g.ranks)
        dtype = tensors[0].dtype if tensors and tensors[0].dtype in (torch.float32, torch.float64) else torch.float32
        n = sum(t.numel() for t in tensors)
        n_extra = 1 if mode == "weighted" else 0
        wire = torch.empty(n + n_extra + 2 * p, dtype=dtype, device=self.wire_device)
        offset = 0
        with torch.no_grad():
            for t in tensors:
                k = t.numel()
                src = t.detach().reshape(-1).to(self.wire_device, dtype)
                dst = wire[offset : offset + k]
                if mode == "weighted":
                    torch.mul(src, float(weight or 0.0), out=dst)
                elif mode == "min":  # one-hot clock slots do not survive MIN: negate and take MAX
                    torch.neg(src, out=dst)
                else:
                    dst.copy_(src)
                offset += k
            if n_extra:
                wire[n] = float(weight or 0.0)
            wire[n + n_extra :] = clock_slots(self.clock.t, g.ranks.index(self.rank), p, dtype)
        reduce_op = dist.ReduceOp.MAX if mode in ("max", "min") else dist.ReduceOp.SUM
        work = dist.all_reduce(wire, op=reduce_op, group=g.handle, async_op=True)
        body = nbytes_of(tensors) if payload is None else payload
        charged = (counted(body, self.bucket_charge) if bucketed else body) + extra_bytes
        seconds, sent = self._issued(charge(g.ranks, charged * self.bytes_scale))

        def finish() -> None:
            start = max(clocks_from(wire[n + n_extra :]))
            divisor: float | None = None
            if mode == "weighted":
                divisor = float(wire[n])
                if divisor <= 0:
                    raise CommError(f"weighted average with total weight {divisor}")
            elif mode == "mean":
                divisor = float(p)
            offset = 0
            with torch.no_grad():
                for t in tensors:
                    k = t.numel()
                    src = wire[offset : offset + k].view(t.shape)
                    same = src.device == t.device and src.dtype == t.dtype
                    if divisor is not None:
                        torch.div(src, divisor, out=t) if same else t.copy_(src / divisor)
                    elif mode == "min":
                        torch.neg(src, out=t) if same else t.copy_(-src)
                    else:
                        t.copy_(src)
                    offset += k
            self._finish(start, seconds, sent)

        return returned(DistWork(self, finish, work, ("g", g.ranks)), async_op)

    # ------------------------------------------------------------------ collectives
    def all_reduce(self, tensor, op: ReduceOp = "sum", group=None, async_op=False):
        return self.all_reduce_coalesced([one_tensor("all_reduce", tensor)], op, group, async_op)

    def all_reduce_coalesced(self, tensors, op: ReduceOp = "sum", group=None, async_op=False):
        tensors = tensor_list("all_reduce_coalesced", tensors)
        return self._packed_collective(
            tensors, group, async_op, op, lambda ranks, n: charges.all_reduce(self.cost, ranks, n)
        )

    def _weighted(self, tensors, weight, group, async_op, pattern: str):
        def charge(ranks: tuple[int, ...], n: float) -> charges.Charge:
            if pattern == "ps":
                return charges.parameter_server(self.cost, ranks, n)
            return charges.all_reduce(self.cost, ranks, n)

        return self._packed_collective(
            tensors, group, async_op, "weighted", charge, weight=float(weight), extra_bytes=4
        )

    def weighted_average(self, tensors, weight, group=None, async_op=False):
        return self._weighted(tensor_list("weighted_average", tensors), weight, group, async_op, "ring")

    def ps_sync(self, tensors, weight, group=None, receive="collective") -> None:
        if receive != "collective":
            raise CommError("ps_sync(receive='async') is charged by the in-process engine only")
        self._weighted(tensors, weight, group, False, "ps")

    def broadcast(self, tensor, src, group=None, async_op=False):
        """The clocks' maximum first (a small blocking all-reduce), then the data, copied at issue and
        written into ``tensor`` at ``wait()`` as every non-blocking call here."""
        tensor = one_tensor("broadcast", tensor)
        g = self._group(group)
        start = self._clock_max(g)
        wire = self._to_wire(tensor.detach().clone())
        work = dist.broadcast(wire, src=src, group=g.handle, async_op=True)
        size = counted(nbytes_of([tensor]), self.bucket_charge) * self.bytes_scale
        seconds, sent = self._issued(charges.broadcast(self.cost, g.ranks, src, size))

        def finish() -> None:
            with torch.no_grad():
                tensor.copy_(wire.to(tensor.device))
            self._finish(start, seconds, sent)

        return returned(DistWork(self, finish, work, ("g", g.ranks)), async_op)

    def reduce_scatter(self, output, input, op: ReduceOp = "sum", group=None, async_op=False):
        """Done as a packed all-reduce of the whole vector (the clocks ride along), then sliced:
        the math and the charged reduce-scatter cost are exact, the real traffic is larger."""
        g = self._group(group)
        p, total = len(g.ranks), input.numel()
        if total % p or output.numel() * p != total:
            raise CommError(f"reduce_scatter: input of {total} elements cannot give {p} outputs of {output.numel()}")
        full = input.detach().reshape(-1).clone()
        i, m = g.ranks.index(self.rank), output.numel()

        def charge(ranks: tuple[int, ...], n: float) -> charges.Charge:
            return charges.reduce_scatter(self.cost, ranks, n)

        handle = self._packed_collective([full], group, True, op, charge)
        assert handle is not None
        inner = handle._finish

        def finish() -> None:
            inner()
            output.copy_(full[i * m : (i + 1) * m].view_as(output))

        handle._finish = finish
        return returned(handle, async_op)

    def all_gather(self, output, input, group=None, async_op=False):
        """Done as a packed sum of one-hot placed pieces (the clocks ride along), charged as a ring all-gather."""
        g = self._group(group)
        p, m = len(g.ranks), input.numel()
        if output.numel() != p * m:
            raise CommError(f"all_gather: output has {output.numel()} elements, expected {p * m}")
        i = g.ranks.index(self.rank)
        placed = torch.zeros(p * m, dtype=input.dtype, device=input.device)
        placed[i * m : (i + 1) * m] = input.detach().reshape(-1)

        def charge(ranks: tuple[int, ...], n: float) -> charges.Charge:
            return charges.all_gather(self.cost, ranks, n)  # per rank: this rank's piece, as in-process

        handle = self._packed_collective([placed], group, True, "sum", charge, payload=nbytes_of([input]))
        assert handle is not None
        inner = handle._finish

        def finish() -> None:
            inner()
            output.copy_(placed.view_as(output))

        handle._finish = finish
        return returned(handle, async_op)

    def charge(self, pattern: str, nbytes: float, group: Group | None = None, async_op: bool = False):
        """The packed collective with an empty body: only the clock slots travel (start = max)."""
        if pattern not in charges.PATTERNS:
            raise ValueError(f"unknown charge pattern {pattern!r}; expected one of {', '.join(charges.PATTERNS)}")

        def charge(ranks: tuple[int, ...], n: float) -> charges.Charge:
            return charges.by_pattern(self.cost, pattern, ranks, n)

        return self._packed_collective([], group, async_op, "sum", charge, extra_bytes=nbytes, bucketed=False)

    def _clock_max(self, g: Group) -> float:
        t = torch.tensor([self.clock.t], dtype=torch.float64, device=self.wire_device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=g.handle)
        return float(t)

    def all_gather_object(self, obj, group=None):
        g = self._group(group)
        out: list[Any] = [None] * len(g.ranks)
        dist.all_gather_object(out, (self.clock.t, obj), group=g.handle)
        start = max(t for t, _ in out)
        seconds, sent = charges.control(self.cost, g.ranks)
        self._finish(start, seconds, sent, ("g", g.ranks))
        return [o for _, o in out]

    def barrier(self, group=None) -> None:
        g = self._group(group)
        start = self._clock_max(g)
        seconds, sent = charges.control(self.cost, g.ranks)
        self._finish(start, seconds, sent, ("g", g.ranks))

    def new_group(self, ranks: Sequence[int]) -> Group:
        ranks_t = tuple(int(r) for r in ranks)
        if len(set(ranks_t)) != len(ranks_t) or any(not 0 <= r < self.world_size for r in ranks_t):
            raise ValueError(f"invalid group ranks {list(ranks_t)} for world size {self.world_size}")
        return Group(ranks_t, dist.new_group(list(ranks_t), timeout=self.timeout))

    @property
    def bytes_sent(self) -> int:
        return int(self._bytes)

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps of this rank's communication: its byte count (lanes are idle at a
        lockstep step boundary, the only place a run is checkpointed)."""
        return {"bytes": int(self._bytes)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._bytes = int(state["bytes"])
