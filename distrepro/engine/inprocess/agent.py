"""In-process gossip agents (:mod:`distrepro.api.gossip`): pairing and averaging beside each worker's computation.

Each worker's agent plays the A²CiD² reference's gossip process in virtual time. While the agent owes an
averaging and has no exchange in flight it waits at the pairing coordinator; it is paired with a waiting
neighbour that lists it (in virtual-time order, the first in the method's random order of candidates), and the
two swap their vectors *as they are at that instant* on the pair's lane (flows share NICs,
:mod:`distrepro.engine.inprocess.lanes`). When the exchange ends each side's endpoint averages the peer's vector
into its current state (Hogwild: a gradient computed before the averaging is applied after it). The worker
meets its agent only at the barrier after each gradient: it waits until the interval's quota is done.

Determinism: every action happens in a scheduler handler at a definite virtual time, while every worker is
parked, so the same inputs give the same pairs, times and bits.

Accounting: while a worker waits at the barrier, time covered by its own exchange is communication and the
rest is idle; exchanges during its computation cost it nothing. Pairing messages are free (the reference sends
them from other processes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from distrepro.api.gossip import GossipEndpoint, check_neighbors
from distrepro.engine.inprocess.fabric_view import FabricView
from distrepro.engine.inprocess.lanes import Op
from distrepro.engine.inprocess.scheduler import Request, Scheduler
from distrepro.errors import CommError
from distrepro.timing import charges
from distrepro.timing.charges import payload_bytes

if TYPE_CHECKING:
    import torch


class _Call(Request):
    """A worker-side agent call, handled at the worker's virtual time."""

    def __init__(
        self,
        fn: Callable[[Scheduler, _Call], None],
        label: str,
        on_stuck: Callable[[Scheduler], bool] | None = None,
    ) -> None:
        self.fn, self.label, self.on_stuck = fn, label, on_stuck

    def handle(self, sched: Scheduler) -> None:
        self.fn(sched, self)

    def on_deadlock(self, sched: Scheduler) -> bool:
        return self.on_stuck(sched) if self.on_stuck is not None else False

    def describe(self) -> str:
        return self.label


class AgentHub:
    """The agents of one fabric and their pairing coordinator (the reference's orchestrator)."""

    def __init__(self, fabric: FabricView) -> None:
        self.fabric = fabric
        self.agents: dict[int, InProcessAgent] = {}
        self.waiting: dict[int, InProcessAgent] = {}  # announced and unpaired, in announcement order

    def create(self, rank: int, neighbors: Sequence[int], endpoint: GossipEndpoint) -> InProcessAgent:
        if rank in self.agents:
            raise CommError(f"rank {rank} asked for a second gossip agent")
        check_neighbors(rank, self.fabric.world_size, neighbors)
        agent = self.agents[rank] = InProcessAgent(self, rank, neighbors, endpoint)
        return agent

    @property
    def sched(self) -> Scheduler:
        return self.fabric.sched

    def gone(self, rank: int) -> bool:
        """``rank`` will pair no more: its agent closed, or its worker ended without one."""
        agent = self.agents.get(rank)
        return self.sched.is_finished(rank) or (agent is not None and agent.closed)

    def allowed(self, a: InProcessAgent, j: int) -> bool:
        """No second averaging with this interval's partner while another neighbour is left (README: pairing)."""
        if j not in a.partners:
            return True
        return all(k in a.partners or self.gone(k) for k in a.neighbors)

    def try_pair(self, a: InProcessAgent, t: float) -> None:
        """``a`` (re)announces itself at ``t`` if it owes an averaging; pair it with a waiting neighbour if any."""
        self.waiting.pop(a.rank, None)
        if a.closed or not a.active or not a.started or a.busy_since is not None or a.owed < 1:
            return
        if all(self.gone(j) for j in a.neighbors):
            a.deactivate(t)
            return
        for j in a.endpoint.candidates():
            b = self.waiting.get(j)
            if b is not None and a.rank in b.neighbors and self.allowed(a, j) and self.allowed(b, a.rank):
                del self.waiting[j]
                self._exchange(a, b, t) if a.rank < b.rank else self._exchange(b, a, t)
                return
        self.waiting[a.rank] = a

    def _exchange(self, a: InProcessAgent, b: InProcessAgent, t: float) -> None:
        fab = self.fabric
        xa, xb = a.endpoint.snapshot().detach().clone(), b.endpoint.snapshot().detach().clone()
        seconds, sent = charges.exchange(fab.cost, a.rank, b.rank, fab.charged(payload_bytes([xa])))
        fab.count_bytes(a.rank, sent)
        fab.count_bytes(b.rank, sent)
        latency = fab.cost.exchange(a.rank, b.rank, 0)
        a.busy_since = b.busy_since = t
        op = Op(
            ("p", (a.rank, b.rank)),
            t,
            seconds,
            min(latency, seconds),
            ((a.rank, b.rank), (b.rank, a.rank)),
            {},
            on_done=lambda op: self._ended(a, b, xa, xb, op.end_s),
        )
        fab.lanes.submit(op)

    def _ended(self, a: InProcessAgent, b: InProcessAgent, xa: torch.Tensor, xb: torch.Tensor, end: float) -> None:
        a.endpoint.receive(end, b.rank, xb)
        b.endpoint.receive(end, a.rank, xa)
        for me, other in ((a, b), (b, a)):
            me.spans.append((me.busy_since if me.busy_since is not None else end, end))
            me.busy_since = None
            me.owed -= 1
            me.done += 1
            me.partners.add(other.rank)
        for me in (a, b):
            me.after_exchange(end)

    def give_up_exclusions(self) -> bool:
        """Every worker waits: forget this interval's partners and pair again; True if a pair formed."""
        for agent in self.waiting.values():
            agent.partners.clear()
        before = sum(agent.busy_since is not None for agent in self.agents.values())
        for rank in sorted(self.waiting):
            still = self.waiting.get(rank)
            if still is not None:
                self.try_pair(still, self.sched.clocks[rank].t)
        return sum(agent.busy_since is not None for agent in self.agents.values()) > before


class InProcessAgent:
    """One worker's agent (:class:`distrepro.api.gossip.GossipAgent`)."""

    def __init__(self, hub: AgentHub, rank: int, neighbors: Sequence[int], endpoint: GossipEndpoint) -> None:
        self.hub, self.rank, self.endpoint = hub, rank, endpoint
        self.neighbors = tuple(dict.fromkeys(int(j) for j in neighbors))  # distinct, in order
        self.owed = 0.0
        self.started = False
        self.active = True  # False once no neighbour is left to pair with
        self.closed = False
        self.busy_since: float | None = None  # start of the exchange in flight
        self.partners: set[int] = set()  # this interval's partners
        self.done = 0  # averagings completed in this interval
        self.spans: list[tuple[float, float]] = []  # own exchanges since the last release
        self.blocked: _Call | None = None  # the worker waits at the barrier
        self.closing: _Call | None = None  # the worker waits for the last exchange to end
        self.next_quota = 0.0

    # ------------------------------------------------------------------ worker side
    def _call(self, fn: Callable[[Scheduler, _Call], None], label: str, stuck: Any = None) -> Any:
        return self.hub.sched.call(self.rank, _Call(fn, label, stuck))

    def start(self, quota: float) -> None:
        def handle(sched: Scheduler, req: _Call) -> None:
            if self.started:
                raise CommError(f"rank {self.rank}: gossip agent started twice")
            self.started = True
            self.owed += quota
            sched.resolve(self.rank)
            self.hub.try_pair(self, sched.clocks[self.rank].t)

        self._call(handle, "gossip agent start")

    def sync(self) -> None:
        self._call(lambda sched, req: sched.resolve(self.rank), "gossip agent sync")

    def barrier(self, next_quota: float) -> int:
        def handle(sched: Scheduler, req: _Call) -> None:
            self.next_quota = next_quota
            if self._quota_met():
                self.release(sched.clocks[self.rank].t)
            else:
                self.blocked = req

        return int(self._call(handle, "the gossip barrier (quota of averagings not done)", self._stuck))

    def close(self) -> None:
        def handle(sched: Scheduler, req: _Call) -> None:
            if self.busy_since is not None:
                self.closing = req  # shut when the exchange in flight ends
            else:
                self._shut(sched.clocks[self.rank].t)

        self._call(handle, "gossip agent close")

    # ------------------------------------------------------------------ handler side
    def _quota_met(self) -> bool:
        return self.owed < 1 or not self.active

    def release(self, t: float) -> None:
        """The barrier opens at ``t``: account the wait, start the next interval, go on gossiping."""
        self.hub.sched.clocks[self.rank].wait_through(self.spans, t)
        count, self.done, self.spans, self.blocked = self.done, 0, [], None
        self.partners.clear()
        self.owed += self.next_quota
        self.next_quota = 0.0
        self.hub.sched.resolve(self.rank, count)
        self.hub.try_pair(self, t)

    def after_exchange(self, t: float) -> None:
        if self.closing is not None:
            clock = self.hub.sched.clocks[self.rank]
            for start, end in self.spans:
                if end > clock.t:
                    clock.finish_op(start, end)
            self._shut(t)
        elif self.blocked is not None and self._quota_met():
            self.release(t)
        else:
            self.hub.try_pair(self, t)

    def deactivate(self, t: float) -> None:
        """No neighbour is left: owe nothing more (a waiting worker goes on)."""
        self.active, self.owed = False, 0.0
        self.hub.waiting.pop(self.rank, None)
        if self.blocked is not None:
            self.release(t)

    def _shut(self, t: float) -> None:
        hub = self.hub
        self.closed, self.active, self.closing = True, False, None
        hub.waiting.pop(self.rank, None)
        hub.sched.resolve(self.rank)
        for j in self.neighbors:  # neighbours left with nobody stop; the others re-try without us
            other = hub.agents.get(j)
            if other is None or other.closed:
                continue
            if all(hub.gone(k) for k in other.neighbors):
                other.deactivate(t)
            elif j in hub.waiting:
                hub.try_pair(other, t)

    def _stuck(self, sched: Scheduler) -> bool:
        """Every worker waits and nothing is in flight: drop the exclusions, else this interval's quota."""
        if self.blocked is None or self.busy_since is not None:
            return False
        if self.hub.give_up_exclusions():
            return True
        self.owed = 0.0
        self.hub.waiting.pop(self.rank, None)
        self.release(sched.clocks[self.rank].t)
        return True
