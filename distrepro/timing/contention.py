"""Contention of synchronous collectives with the backward they overlap: the charge both engines make.

Why: a DDP-style step launches each gradient bucket's all-reduce while backward goes on; NCCL's kernels then take
streaming multiprocessors and memory bandwidth from backward's, which runs slower for as long as a collective
overlaps it (:data:`distrepro.timing.framework.CONTENTION`, with its sources). The engines used to charge backward
as if it ran alone.

The rule, per worker, one ledger per clock (:class:`distrepro.engine.clock.VirtualClock`):

* a bucketed forward/backward opens a *backward* (:meth:`ContentionLedger.begin`, at clock ``b``) and closes it
  at its nominal end ``B`` (:meth:`ContentionLedger.end`); a non-blocking collective issued while one is open, or
  at the very moment it closed (DDP's last bucket), carries its tag;
* backward's compute runs ``1 + factor`` times slower while one of its collectives is on the stream
  (:func:`~distrepro.timing.framework.slowed_finish_s`), so it is *really* done at ``B' ≥ B``; its debt is
  ``D = B' − B``;
* a collective issued at nominal ``issue`` was really launched when the slowed backward got there, and one stream
  runs its collectives in order: when it is waited for, it is moved to start at ``max(start, launch, the previous
  one's end)`` (same length), which is where the contention delays the later buckets;
* time the worker spent waiting or communicating after ``B`` absorbed that much of the delay (the GPU's compute
  stream was free then): the worker owes ``D`` minus that slack, and is charged as compute whatever of it is not
  charged yet, before the wait moves its clock to the (moved) collective's end.

With DDP (the wait right after backward) the step then ends at ``max(B', last bucket's moved end)``; with
Decent-DP's overlap (a round's exchange waited for during the next step) the delay lands in the next step, as the
late backward pushes it on the real GPU. A collective's spans are known only when it is waited for (the
distributed engine learns the other ranks' issue times then), so each worker moves its own view: the members of a
synchronous collective with equal delays agree; where they differ, a member whose delay is not the latest sees the
collective end early by at most the others' extra delay, and meets them at the next collective. Waits in issue
order (the reducer's) see every earlier bucket; a later bucket waited for first is moved by the earlier ones known
then. The charge is a function of each worker's own clock and the collectives' (issue, start, end), which both
engines compute identically, so the engines agree; the sensitivity replay (:mod:`distrepro.sensitivity.analytic`)
and :func:`distrepro.timing.framework.ddp_step_s` apply this same rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from distrepro.timing.framework import slowed_finish_s

#: backwards remembered per worker (a collective is waited for within a step or, with Decent-DP, the next)
_KEPT = 8


@dataclass
class _Backward:
    begin_s: float  # clock b when it opened
    end_s: float | None = None  # nominal end B, None while open
    slack_at_end: float = 0.0  # the worker's non-compute seconds (idle + communication) at B
    #: its collectives as waited for: (issue, start, end, moved start, moved end)
    busy: list[tuple[float, float, float, float, float]] = field(default_factory=list)
    charged_s: float = 0.0  # what of the debt was charged as compute


@dataclass
class ContentionLedger:
    """One worker's open and recent backwards and what collectives overlapping them cost it (see the module)."""

    factor: float
    _count: int = 0
    _open: int | None = None
    _backwards: dict[int, _Backward] = field(default_factory=dict)

    def begin(self, t: float) -> None:
        """A bucketed backward starts at clock ``t``: collectives issued from now on overlap it."""
        self._count += 1
        self._open = self._count
        self._backwards[self._count] = _Backward(t)
        for old in [k for k in self._backwards if k <= self._count - _KEPT]:
            del self._backwards[old]

    def end(self, t: float, slack_s: float) -> None:
        """The open backward ends at ``t``; the worker had spent ``slack_s`` seconds not computing so far."""
        if self._open is not None:
            entry = self._backwards[self._open]
            entry.end_s, entry.slack_at_end = t, slack_s
        self._open = None

    def tag(self, t: float) -> int | None:
        """The backward a collective issued at clock ``t`` belongs to: the open one, or the one that closed at ``t``
        (DDP's last bucket, launched as backward ends); None when contention is pinned off."""
        if self.factor <= 0:
            return None
        if self._open is not None:
            return self._open
        last = self._backwards.get(self._count)
        return self._count if last is not None and last.end_s == t else None

    def settle(
        self, tag: int | None, issue_s: float, start_s: float, end_s: float, t: float, slack_s: float
    ) -> tuple[float, float, float]:
        """The collective ``[start_s, end_s]`` issued at ``issue_s`` during backward ``tag`` is waited for at clock
        ``t``, with ``slack_s`` non-compute seconds so far: (compute seconds to charge now, its moved start, its
        moved end)."""
        entry = self._backwards.get(tag) if tag is not None else None
        if entry is None:
            return 0.0, start_s, end_s
        for issued, start, end, moved_start, moved_end in entry.busy:  # waited for before: owes nothing more
            if (issued, start, end) == (issue_s, start_s, end_s):
                return 0.0, moved_start, moved_end
        earlier = sorted((s, e) for i, _, _, s, e in entry.busy if i <= issue_s)  # issued before it, on its stream
        launch = slowed_finish_s(entry.begin_s, issue_s - entry.begin_s, earlier, self.factor)
        moved = max(start_s, launch, max((e for _, e in earlier), default=start_s)) - start_s
        entry.busy.append((issue_s, start_s, end_s, start_s + moved, end_s + moved))
        start_s, end_s = start_s + moved, end_s + moved
        closed = entry.end_s is not None
        nominal_end = entry.end_s if entry.end_s is not None else t - entry.charged_s
        spans = sorted((s, e) for _, _, _, s, e in entry.busy)
        debt = slowed_finish_s(entry.begin_s, nominal_end - entry.begin_s, spans, self.factor) - nominal_end
        slack = max(0.0, slack_s - entry.slack_at_end) if closed else 0.0
        due = max(0.0, debt - slack) - entry.charged_s
        if due <= 0:
            return 0.0, start_s, end_s
        entry.charged_s += due
        return due, start_s, end_s

    def state_dict(self) -> dict[str, Any]:
        return {
            "count": self._count,
            "open": self._open,
            "backwards": [
                [k, b.begin_s, b.end_s, b.slack_at_end, [list(s) for s in b.busy], b.charged_s]
                for k, b in self._backwards.items()
            ],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._count, self._open = int(state["count"]), state["open"]
        self._backwards = {}
        for row in state["backwards"]:
            if len(row) == 5:  # written before the launches moved: [k, end, slack, debt, charged], no spans kept
                k, end, slack, _debt, charged = row
                self._backwards[int(k)] = _Backward(end if end is not None else 0.0, end, slack, [], charged)
            else:
                k, begin, end, slack, busy, charged = row
                spans = [(i, s, e, ms, me) for i, s, e, ms, me in busy]
                self._backwards[int(k)] = _Backward(begin, end, slack, spans, charged)
