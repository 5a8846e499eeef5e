"""Communication lanes of the in-process engine: operations queue per lane, flows share NICs.

Lane semantics (both engines): every operation runs on one *lane*, the ordered channel of its
communicator: a collective on the lane of its group (every member calls collectives on a group in the
same order, as on one NCCL communicator/stream), a point-to-point exchange on the lane of its pair. A
lane is FIFO: an operation starts at ``max(last member's issue, end of the previous operation on the
lane)``. Operations on *different* lanes run concurrently; their data moves as flows
(:mod:`distrepro.timing.network`) that share each node's NIC (and each intra-node link) max-min fairly.

An operation is ``latency + data``: its data phase is a flow of ``volume`` bytes at up to ``cap`` bytes/s
starting at the operation's start; the operation ends ``latency`` after its data has moved (per-message
overhead is paid once the bytes are on the wire, and does not hold the NIC). Alone, it ends at exactly
``start + cost`` (the alpha-beta charge), bit for bit, so a run without concurrent flows is unchanged.

Here the schedule is exact: flow events go through the scheduler's heap at their virtual times, before any
worker request stamped at the same time, so the order is a pure function of virtual times.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

import torch

from distrepro.engine.inprocess.scheduler import Request, Scheduler
from distrepro.timing.network import Flow, FlowNetwork, Paths


@dataclass
class InProcessWork:
    """Handle of a non-blocking in-process operation (see :class:`distrepro.api.method.Work`).

    ``issue_s``: when this rank issued it; ``start_s``/``end_s``: when it started (last member in and the
    lane free) and completed, set once known. ``results`` pairs the operation's own copy of each output
    with the caller's tensor; ``wait()`` copies them over, once. ``value``: what :meth:`result` returns
    (the peer's tensor of an exchange, the partner of a pairing).
    """

    comm: Any
    issue_s: float = 0.0
    start_s: float = float("nan")
    end_s: float = float("nan")
    done: bool = False
    waiter: int | None = None
    value: Any = None
    idle_only: bool = False  # a pairing: the wait is idle time, not communication
    #: the backward this synchronous collective overlaps (:meth:`~distrepro.engine.clock.VirtualClock.backward_tag`)
    backward: int | None = None
    #: the request that will complete it if every worker ends up waiting (a non-blocking pairing)
    pending: Request | None = field(default=None, repr=False)
    results: list[tuple[torch.Tensor, torch.Tensor]] = field(default_factory=list)

    def is_completed(self) -> bool:
        return self.done

    def wait(self) -> None:
        self.comm._call(_WaitRequest(self))
        with torch.no_grad():
            for staged, target in self.results:
                target.copy_(staged)
        self.results = []

    def result(self) -> Any:
        return self.value

    def finish(self, sched: Scheduler, rank: int) -> None:
        """Move ``rank``'s clock over this operation (waiting for it)."""
        clock = sched.clocks[rank]
        if self.idle_only:
            clock.idle_until(self.end_s)
        else:
            clock.finish_op(self.start_s, self.end_s, self.backward, self.issue_s)

    def complete(self, sched: Scheduler, start: float, end: float, value: Any = None) -> None:
        self.start_s, self.end_s, self.done = start, end, True
        if value is not None:
            self.value = value
        if self.waiter is not None:
            self.finish(sched, self.waiter)
            sched.resolve(self.waiter)


class _WaitRequest(Request):
    def __init__(self, work: InProcessWork) -> None:
        self.work = work

    def handle(self, sched: Scheduler) -> None:
        if self.work.done:
            self.work.finish(sched, self.rank)
            sched.resolve(self.rank)
        else:
            self.work.waiter = self.rank

    def on_deadlock(self, sched: Scheduler) -> bool:
        pending = self.work.pending
        return pending is not None and not self.work.done and pending.on_deadlock(sched)

    def describe(self) -> str:
        return "wait() on an unfinished non-blocking operation"


@dataclass
class Op:
    """One operation on a lane. ``members``: rank -> its Work (non-blocking) or None (blocking, resolved
    with ``results.get(rank)`` at the end)."""

    lane: Hashable
    ready_s: float
    cost_s: float
    latency_s: float
    hops: tuple[tuple[int, int], ...]
    members: dict[int, InProcessWork | None]
    results: dict[int, Any] = field(default_factory=dict)
    start_s: float = 0.0
    end_s: float = float("nan")
    on_done: Callable[[Op], None] | None = None


class Lanes:
    """FIFO lanes plus the flow network of one in-process fabric."""

    def __init__(self, sched: Scheduler, paths: Paths) -> None:
        self.sched, self.paths = sched, paths
        self.net = FlowNetwork(paths.capacity)
        self._busy: dict[Hashable, deque[Op]] = {}
        self._version = 0
        self._ids = 0

    def submit(self, op: Op) -> None:
        """``op`` is ready (every member issued it) at ``op.ready_s`` = the current event time."""
        queue = self._busy.get(op.lane)
        if queue is not None:
            queue.append(op)
            return
        self._busy[op.lane] = deque()
        self._start(op, op.ready_s)

    def _start(self, op: Op, t: float) -> None:
        op.start_s = t
        data_s = op.cost_s - op.latency_s
        if not op.hops or data_s <= 0:
            self._data_done(op, t, exact=True)
            return
        cap, uses = self.paths.of(op.hops)
        self._ids += 1
        self.net.add(Flow(self._ids, data_s * cap, cap, uses, t, extra=op), t)
        self._reschedule()

    def _reschedule(self) -> None:
        nxt = self.net.next_completion()
        if nxt is None:
            return
        self._version += 1
        version = self._version
        self.sched.at(nxt[0], lambda t: self._tick(t, version), "a network flow ending")

    def _tick(self, t: float, version: int) -> None:
        if version != self._version:
            return  # rates changed since this event was planned; a newer one stands
        self.net.advance(t)
        while True:
            nxt = self.net.next_completion()
            if nxt is None or nxt[0] > t:
                break
            flow = self.net.remove(nxt[1].key)
            self._data_done(flow.extra, t, exact=not flow.contended)  # type: ignore[arg-type]
        self._reschedule()

    def _data_done(self, op: Op, t: float, exact: bool) -> None:
        end = op.start_s + op.cost_s if exact else t + op.latency_s
        if end > t:
            self.sched.at(end, lambda _t: self._done(op, end), "an operation ending")
        else:
            self._done(op, end)

    def _done(self, op: Op, end: float) -> None:
        sched = self.sched
        op.end_s = end
        for r, work in op.members.items():
            if work is None:
                sched.clocks[r].finish_op(op.start_s, end)
                sched.resolve(r, op.results.get(r))
            else:
                work.complete(sched, op.start_s, end, op.results.get(r))
        if op.on_done is not None:
            op.on_done(op)
        queue = self._busy[op.lane]
        if queue:
            self._start(queue.popleft(), end)
        else:
            del self._busy[op.lane]
