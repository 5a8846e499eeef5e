"""Per-worker virtual clock.

Training is real; time is modelled. Each worker owns a :class:`VirtualClock` in seconds that the
harness advances by the modelled compute time of every forward/backward and by the modelled
cost of every communication. Time spent waiting for slower peers is kept apart as *idle*, so a
report can show who computed, who talked and who waited (a Gantt chart of a few steps).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from distrepro.job.results import Span, SpanKind
from distrepro.timing.contention import ContentionLedger


@dataclass
class VirtualClock:
    """A worker's virtual time and its split into compute, communication and idle time.

    ``max_spans`` bounds how many timeline spans are kept (the first ones: a report shows a few
    steps, and a long run must not grow memory without bound).
    """

    rank: int
    max_spans: int = 400
    t: float = 0.0
    compute_s: float = 0.0
    comm_s: float = 0.0
    idle_s: float = 0.0
    step: int = 0
    spans: list[Span] = field(default_factory=list)
    #: what synchronous collectives overlapping this worker's backward cost it (:mod:`distrepro.timing.contention`);
    #: factor 0 (the default) charges nothing
    contention: ContentionLedger = field(default_factory=lambda: ContentionLedger(0.0))

    def now(self) -> float:
        return self.t

    def state_dict(self) -> dict[str, Any]:
        """Everything that moves: the time, its split, the step and the timeline kept so far."""
        return {
            "t": self.t,
            "compute_s": self.compute_s,
            "comm_s": self.comm_s,
            "idle_s": self.idle_s,
            "step": self.step,
            "spans": list(self.spans),
            "contention": self.contention.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.t, self.compute_s, self.comm_s = state["t"], state["compute_s"], state["comm_s"]
        self.idle_s, self.step, self.spans = state["idle_s"], state["step"], list(state["spans"])
        if "contention" in state:  # a checkpoint written before the charge existed has none
            self.contention.load_state_dict(state["contention"])

    # ------------------------------------------------------------------ contention with backward
    def begin_backward(self) -> None:
        """A bucketed backward starts: non-blocking collectives issued until :meth:`end_backward` overlap it."""
        self.contention.begin(self.t)

    def end_backward(self) -> None:
        self.contention.end(self.t, self.idle_s + self.comm_s)

    def backward_tag(self) -> int | None:
        """What a non-blocking synchronous collective issued now records: the backward it overlaps, if any."""
        return self.contention.tag(self.t)

    def _span(self, kind: SpanKind, dt: float) -> None:
        if dt > 0 and len(self.spans) < self.max_spans:
            self.spans.append(Span(self.rank, kind, self.t, self.t + dt, self.step))

    def compute(self, dt: float) -> None:
        """Charge ``dt`` seconds of computation."""
        if dt < 0:
            raise ValueError(f"negative compute time {dt}")
        self._span("compute", dt)
        self.t += dt
        self.compute_s += dt

    def communicate(self, dt: float) -> None:
        """Charge ``dt`` seconds of communication the worker could not hide."""
        if dt < 0:
            raise ValueError(f"negative communication time {dt}")
        self._span("comm", dt)
        self.t += dt
        self.comm_s += dt

    def idle_until(self, t: float) -> None:
        """Wait (idle) until virtual time ``t``; no-op if ``t`` is not in the future."""
        dt = t - self.t
        if dt > 0:
            self._span("idle", dt)
            self.t = t
            self.idle_s += dt

    def wait_through(self, busy: list[tuple[float, float]], t: float) -> None:
        """Wait until ``t`` while this worker's own operations ``busy`` (start, end) ran: the parts of the
        wait they cover are communication, the rest idle; parts already in the past cost nothing.

        A gossip worker waiting at its barrier for its quota of averagings (both engines' gossip agents):
        time on the wire in its own exchange is communication, time waiting for a partner is idle."""
        for start, end in sorted(busy):
            if end > self.t:
                self.idle_until(min(start, t))
                if min(end, t) > self.t:
                    self.communicate(min(end, t) - self.t)
        self.idle_until(t)

    def finish_op(self, start_s: float, end_s: float, tag: int | None = None, issue_s: float = 0.0) -> None:
        """Complete an operation that started at ``start_s`` and ended at ``end_s``.

        Time before the start is idle (waiting for the last member); the rest up to the end
        is communication. Parts already in the past (overlapped with compute) cost nothing. A synchronous
        collective issued at ``issue_s`` during backward ``tag`` (:meth:`backward_tag`) first charges, as compute,
        what its overlap slowed that backward and no waiting absorbed, and starts no earlier than the slowed backward
        launched it (:mod:`distrepro.timing.contention`).
        """
        if tag is not None:
            slack = self.idle_s + self.comm_s
            owed, start_s, end_s = self.contention.settle(tag, issue_s, start_s, end_s, self.t, slack)
            if owed > 0:
                self.compute(owed)
        self.idle_until(start_s)
        if end_s > self.t:
            self.communicate(end_s - self.t)
