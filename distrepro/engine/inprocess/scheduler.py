"""Discrete-event scheduler for K virtual workers in one process.

Every worker runs its loop as a greenlet (a coroutine with its own stack) in one OS thread, so
method code is plain blocking code, exactly as under ``torch.distributed``. Whenever a worker
communicates it *parks* with a :class:`Request` stamped with its virtual time. The scheduler
always handles the parked request with the smallest ``(virtual time, rank, sequence)`` next, so
interactions between workers happen in virtual-time order whatever the real compute cost was
(FedScale's lesson: order asynchronous events by virtual time, not by OS arrival). Because only
one worker runs at a time and the order is a pure function of virtual times, the same inputs
give bitwise identical results.

A *wave* is every worker that runs between two handled requests (all the workers one handler released, each
until it parks again). Work a worker hands :meth:`Scheduler.join_wave` waits, without a request, until the
wave's last worker has parked, and is then done for all of them at once before any request is handled: the
batched forward/backward of :mod:`distrepro.engine.inprocess.batching`. No handler runs between a worker's
joining and its work, so every worker computes on the state it would have computed on alone; only the order of
the workers' own code around it changes (each worker's code before the work, then each one's after it).

Greenlets rather than threads: one OS thread keeps one OpenMP team for torch's intra-op
parallelism; with one thread per worker the per-thread teams cost 18-33% on 2 cores
(measured). Autograd's grad mode is thread-local, so it is saved and restored per worker at
every switch.
"""

from __future__ import annotations

import abc
import heapq
import itertools
from collections.abc import Callable, Sequence
from typing import Any

import greenlet
import torch

from distrepro.engine.clock import VirtualClock
from distrepro.engine.inprocess.watchdog import Stalled
from distrepro.errors import DeadlockError, WorkerFailure
from distrepro.plugins.crash_site import crash_site


class Request(abc.ABC):
    """Something a parked worker asks for; handled in virtual-time order by the scheduler."""

    rank: int

    @abc.abstractmethod
    def handle(self, sched: Scheduler) -> None:
        """Act on the request. Resolve this or other workers with ``sched.resolve``, or leave the
        caller blocked (it will be resolved by a later request)."""

    def on_deadlock(self, sched: Scheduler) -> bool:
        """Called when nothing is pending and this worker is still blocked; return True if the
        request could resolve itself (e.g. a gossip pairing whose neighbours all finished)."""
        return False

    def describe(self) -> str:
        return type(self).__name__


class Scheduler:
    """Runs worker callables cooperatively, one at a time, in virtual-time order."""

    def __init__(self, clocks: Sequence[VirtualClock]) -> None:
        self.clocks = list(clocks)
        self.world_size = len(clocks)
        self._pending: list[tuple[float, int, int, Request]] = []
        self._seq = itertools.count()
        self._runnable: list[int] = []
        self._values: dict[int, Any] = {}
        self._blocked: dict[int, Request] = {}
        self._finished = [False] * self.world_size
        self._grad_mode = [True] * self.world_size
        self._greenlets: list[greenlet.greenlet] = []
        self._main: greenlet.greenlet | None = None
        self.current: int | None = None
        self._wave: list[tuple[int, Any]] = []
        #: does the work of a wave (:meth:`join_wave`): one result per item, in the items' order
        self.wave_handler: Callable[[list[tuple[int, Any]]], list[Any]] | None = None

    # ------------------------------------------------------------------ worker side
    def call(self, rank: int, request: Request) -> Any:
        """Park ``rank`` with ``request`` at its current virtual time; return what it resolves to."""
        if self._main is None or self.current != rank:
            raise RuntimeError(f"rank {rank} called the scheduler outside its own worker")
        request.rank = rank
        heapq.heappush(self._pending, (self.clocks[rank].t, rank, next(self._seq), request))
        self._grad_mode[rank] = torch.is_grad_enabled()
        value = self._main.switch()
        torch.set_grad_enabled(self._grad_mode[rank])
        return value

    def wave_has_company(self) -> bool:
        """Whether a worker that joins the wave now may share it: another has joined, or another is still to run."""
        return bool(self._wave or self._runnable)

    def join_wave(self, rank: int, item: Any) -> Any:
        """Park ``rank`` until every worker of this wave has parked, then return what :attr:`wave_handler` made of
        ``item`` (done together with the wave's other items, before any request is handled)."""
        if self._main is None or self.current != rank or self.wave_handler is None:
            raise RuntimeError(f"rank {rank} joined a wave outside its own worker or without a wave handler")
        self._wave.append((rank, item))
        self._grad_mode[rank] = torch.is_grad_enabled()
        value = self._main.switch()
        torch.set_grad_enabled(self._grad_mode[rank])
        return value

    def at(self, t: float, fn: Callable[[float], None], label: str = "network event") -> None:
        """Run ``fn(t)`` at virtual time ``t``, before any worker's request stamped ``t`` (network flows
        ending; :mod:`distrepro.engine.inprocess.lanes`). Ordered with requests by (time, -1, sequence)."""
        req = _Timed(fn, t, label)
        req.rank = -1
        heapq.heappush(self._pending, (t, -1, next(self._seq), req))

    # ------------------------------------------------------------------ handler side
    def resolve(self, rank: int, value: Any = None) -> None:
        """Let ``rank`` continue; its ``call`` returns ``value``."""
        self._blocked.pop(rank, None)
        self._values[rank] = value
        self._runnable.append(rank)

    def block(self, rank: int, request: Request) -> None:
        """Record that ``rank`` waits on ``request`` (for deadlock reports)."""
        self._blocked[rank] = request

    def is_finished(self, rank: int) -> bool:
        return self._finished[rank]

    def finished_ranks(self) -> list[int]:
        return [r for r in range(self.world_size) if self._finished[r]]

    # ------------------------------------------------------------------ driver
    def run(self, targets: Sequence[Callable[[], None]]) -> None:
        """Run one callable per rank to completion. Raises :class:`WorkerFailure` naming the rank
        if a worker raises, :class:`DeadlockError` if all remaining workers wait forever."""
        if len(targets) != self.world_size:
            raise ValueError("one target per rank")
        self._main = greenlet.getcurrent()
        self._greenlets = [greenlet.greenlet(fn) for fn in targets]
        outer_grad = torch.is_grad_enabled()
        try:
            self._runnable = list(range(self.world_size))
            while True:
                self._run_runnable()
                if self._pending:
                    _, _, _, req = heapq.heappop(self._pending)
                    if req.rank >= 0:
                        self.block(req.rank, req)
                    with torch.no_grad():
                        req.handle(self)
                    continue
                if all(self._finished):
                    return
                if not self._break_deadlock():
                    waits = "; ".join(
                        f"rank {r} waits in {req.describe()} at t={self.clocks[r].t:.6f}s"
                        for r, req in sorted(self._blocked.items())
                    )
                    done = self.finished_ranks()
                    raise DeadlockError(f"no worker can proceed: {waits}; finished ranks: {done}")
        finally:
            self._main = None
            self.current = None
            # Dropping the greenlets kills workers still parked (after a failure or deadlock); their
            # unwinding runs grad-mode context managers, so the caller's mode is restored after it.
            self._greenlets = []
            torch.set_grad_enabled(outer_grad)

    def _run_runnable(self) -> None:
        while True:
            self._run_wave()
            if not self._wave:
                return
            wave, self._wave = self._wave, []
            assert self.wave_handler is not None
            for (rank, _), value in zip(wave, self.wave_handler(wave), strict=True):
                self.resolve(rank, value)

    def _run_wave(self) -> None:
        while self._runnable:
            self._runnable.sort()
            rank = self._runnable.pop(0)
            value = self._values.pop(rank, None)
            self.current = rank
            torch.set_grad_enabled(self._grad_mode[rank])
            try:
                g = self._greenlets[rank]
                if g:  # started: resume the parked call with its value
                    g.switch(value)
                else:  # first run: start the worker's callable
                    g.switch()
            except Exception as exc:  # the worker raised: stop everything, name the rank
                self._finished[rank] = True
                raise WorkerFailure(rank, f"{type(exc).__name__}: {exc}{crash_site(exc)}") from exc
            except SystemExit as exc:  # sys.exit() in a method is a failure, never a run that finished
                self._finished[rank] = True
                raise WorkerFailure(rank, f"called sys.exit({exc.code!r}) before the budget completed") from exc
            except Stalled as exc:  # the watchdog again, after the method swallowed it: the rank is not resumed
                self._finished[rank] = True
                raise WorkerFailure(rank, f"NoProgress: {exc}") from None
            finally:
                self.current = None
            if self._greenlets[rank].dead:
                self._finished[rank] = True

    def _break_deadlock(self) -> bool:
        progressed = False
        for rank in sorted(self._blocked):
            req = self._blocked[rank]
            with torch.no_grad():
                if req.on_deadlock(self):
                    progressed = True
        return progressed or bool(self._runnable)


class _Timed(Request):
    """A network event: not a worker's request, so it blocks nobody."""

    def __init__(self, fn: Callable[[float], None], t: float, label: str) -> None:
        self.fn, self.t, self.label = fn, t, label

    def handle(self, sched: Scheduler) -> None:
        self.fn(self.t)

    def describe(self) -> str:
        return self.label
