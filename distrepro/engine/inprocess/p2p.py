"""In-process point-to-point requests and the engine's own zero-cost events.

Split from :mod:`distrepro.engine.inprocess.comm` (collectives): the pairwise exchange, the gossip
pairing coordinator (as the A²CiD² reference orchestrator pairs ready neighbours), and the
harness's end-of-step rendezvous and events, all handled in virtual-time order by the scheduler.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from distrepro.engine.inprocess.fabric_view import FabricView
from distrepro.engine.inprocess.lanes import InProcessWork, Op
from distrepro.engine.inprocess.scheduler import Request, Scheduler
from distrepro.errors import CommError
from distrepro.timing import charges
from distrepro.timing.charges import payload_bytes


class ExchangeRequest(Request):
    """A pairwise swap on the pair's lane; non-blocking: the tensor is taken at issue, the peer's at ``wait()``."""

    def __init__(self, fabric: FabricView, peer: int, tensor: torch.Tensor, async_op: bool = False) -> None:
        self.fabric, self.peer, self.async_op = fabric, peer, async_op
        self.tensor = tensor.detach().clone() if async_op else tensor
        self.work: InProcessWork | None = None

    def describe(self) -> str:
        return f"exchange with rank {self.peer}"

    def handle(self, sched: Scheduler) -> None:
        fab = self.fabric
        if sched.is_finished(self.peer):
            raise CommError(f"rank {self.rank} exchanges with rank {self.peer}, which has finished")
        pair = (min(self.rank, self.peer), max(self.rank, self.peer))
        key = (pair, fab.next_seq(self.rank, pair))
        now = sched.clocks[self.rank].t
        if self.async_op:
            self.work = InProcessWork(fab.comms[self.rank], issue_s=now)
            sched.resolve(self.rank, self.work)
        other = fab.exchanges.pop(key, None)
        if other is None:
            fab.exchanges[key] = (self, now)
            return
        peer_req, peer_t = other
        if peer_req.rank != self.peer or peer_req.peer != self.rank:
            raise CommError(f"exchange mismatch between ranks {pair}")
        start = max(peer_t, now)
        a, b = self.tensor.detach().clone(), peer_req.tensor.detach().clone()
        seconds, sent = charges.exchange(fab.cost, self.rank, self.peer, fab.charged(payload_bytes([self.tensor])))
        fab.count_bytes(self.rank, sent)
        fab.count_bytes(self.peer, sent)
        latency = fab.cost.exchange(self.rank, self.peer, 0)
        hops = ((self.rank, self.peer), (self.peer, self.rank))
        members = {self.rank: self.work, self.peer: peer_req.work}
        op = Op(("p", pair), start, seconds, min(latency, seconds), hops, members, {self.rank: b, self.peer: a})
        fab.lanes.submit(op)


class PairRequest(Request):
    """Gossip pairing: match with a waiting neighbour that lists us, as the A²CiD² orchestrator does.

    Non-blocking (``async_op``): the rank is registered as asking and goes on; the Work completes when a
    neighbour pairs with it (at that neighbour's request time), its ``result()`` the partner or None.
    """

    def __init__(self, fabric: FabricView, neighbors: Sequence[int], async_op: bool = False) -> None:
        self.fabric, self.neighbors, self.async_op = fabric, tuple(int(n) for n in neighbors), async_op
        self.work: InProcessWork | None = None

    def describe(self) -> str:
        return f"pair() with neighbours {list(self.neighbors)}"

    def _answer(self, sched: Scheduler, value: int | None, t: float) -> None:
        if self.work is not None:
            self.work.complete(sched, t, t, value)
            self.work.value = value
        else:
            sched.clocks[self.rank].idle_until(t)
            sched.resolve(self.rank, value)

    def handle(self, sched: Scheduler) -> None:
        waiting = self.fabric.pair_waiting
        if self.rank in waiting:
            raise CommError(f"rank {self.rank} asks to pair while its previous pair() is still unanswered")
        t = sched.clocks[self.rank].t
        if self.async_op:
            self.work = InProcessWork(self.fabric.comms[self.rank], issue_s=t, idle_only=True, pending=self)
            sched.resolve(self.rank, self.work)
        for j in self.neighbors:
            req = waiting.get(j)
            if req is not None and self.rank in req.neighbors:
                del waiting[j]
                req._answer(sched, self.rank, t)
                self._answer(sched, j, t)
                return
        if all(sched.is_finished(j) for j in self.neighbors):
            self._answer(sched, None, t)
            return
        waiting[self.rank] = self

    def on_deadlock(self, sched: Scheduler) -> bool:
        if all(sched.is_finished(j) or j in self.fabric.pair_waiting for j in self.neighbors):
            # nobody that could still pair with us will ever ask: give up on this exchange
            self.fabric.pair_waiting.pop(self.rank, None)
            self._answer(sched, None, sched.clocks[self.rank].t)
            return True
        return False


class EventRequest(Request):
    """A zero-cost engine event (step accounting, evaluation) applied in virtual-time order."""

    def __init__(self, fn: Callable[[], Any], label: str) -> None:
        self.fn, self.label = fn, label

    def describe(self) -> str:
        return self.label

    def handle(self, sched: Scheduler) -> None:
        sched.resolve(self.rank, self.fn())


class ControlRequest(Request):
    """A zero-cost engine rendezvous of all ranks (lockstep step decisions); clocks untouched."""

    def __init__(self, fabric: FabricView, payload: Any, on_complete: Callable[[dict[int, Any]], Any]) -> None:
        self.fabric, self.payload, self.on_complete = fabric, payload, on_complete

    def describe(self) -> str:
        return "the harness's end-of-step rendezvous"

    def handle(self, sched: Scheduler) -> None:
        arrived = self.fabric.control_arrivals
        arrived[self.rank] = self.payload
        if len(arrived) < sched.world_size:
            return
        self.fabric.control_arrivals = {}
        result = self.on_complete(arrived)
        for r in range(sched.world_size):
            sched.resolve(r, result)
