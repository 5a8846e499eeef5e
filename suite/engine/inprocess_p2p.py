"""In-process point-to-point requests and the engine's own zero-cost events.

Split from :mod:`suite.engine.inprocess_comm` (collectives): the pairwise exchange, the gossip
pairing coordinator (as the A²CiD² reference orchestrator pairs ready neighbours), and the
harness's end-of-step rendezvous and events, all handled in virtual-time order by the scheduler.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from suite.engine import charges
from suite.engine.scheduler import Request, Scheduler
from suite.errors import CommError

if TYPE_CHECKING:
    from suite.engine.inprocess_comm import Fabric


def _nbytes(tensors: Sequence[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


class ExchangeRequest(Request):
    def __init__(self, fabric: Fabric, peer: int, tensor: torch.Tensor) -> None:
        self.fabric, self.peer, self.tensor = fabric, peer, tensor

    def describe(self) -> str:
        return f"exchange with rank {self.peer}"

    def handle(self, sched: Scheduler) -> None:
        fab = self.fabric
        if sched.is_finished(self.peer):
            raise CommError(f"rank {self.rank} exchanges with rank {self.peer}, which has finished")
        pair = (min(self.rank, self.peer), max(self.rank, self.peer))
        key = (pair, fab.next_seq(self.rank, pair))
        other = fab.exchanges.pop(key, None)
        if other is None:
            fab.exchanges[key] = (self, sched.clocks[self.rank].t)
            return
        peer_req, peer_t = other
        if peer_req.rank != self.peer or peer_req.peer != self.rank:
            raise CommError(f"exchange mismatch between ranks {pair}")
        start = max(peer_t, sched.clocks[self.rank].t)
        a, b = self.tensor.detach().clone(), peer_req.tensor.detach().clone()
        seconds, sent = charges.exchange(fab.cost, self.rank, self.peer, fab.charged(_nbytes([self.tensor])))
        end = start + seconds
        for r, got in ((self.rank, b), (self.peer, a)):
            fab.count_bytes(r, sent)
            sched.clocks[r].finish_op(start, end)
            sched.resolve(r, got)


class PairRequest(Request):
    """Gossip pairing: match with a waiting neighbour that lists us, as the A²CiD² orchestrator does."""

    def __init__(self, fabric: Fabric, neighbors: Sequence[int]) -> None:
        self.fabric, self.neighbors = fabric, tuple(int(n) for n in neighbors)

    def describe(self) -> str:
        return f"pair() with neighbours {list(self.neighbors)}"

    def handle(self, sched: Scheduler) -> None:
        waiting = self.fabric.pair_waiting
        for j in self.neighbors:
            req = waiting.get(j)
            if req is not None and self.rank in req.neighbors:
                del waiting[j]
                t = sched.clocks[self.rank].t
                sched.clocks[j].idle_until(t)
                sched.resolve(j, self.rank)
                sched.resolve(self.rank, j)
                return
        if all(sched.is_finished(j) for j in self.neighbors):
            sched.resolve(self.rank, None)
            return
        waiting[self.rank] = self

    def on_deadlock(self, sched: Scheduler) -> bool:
        if all(sched.is_finished(j) or j in self.fabric.pair_waiting for j in self.neighbors):
            # nobody that could still pair with us will ever ask: give up on this exchange
            self.fabric.pair_waiting.pop(self.rank, None)
            sched.resolve(self.rank, None)
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

    def __init__(self, fabric: Fabric, payload: Any, on_complete: Callable[[dict[int, Any]], Any]) -> None:
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
