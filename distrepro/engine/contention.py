"""Contention of synchronous collectives with the backward they overlap: the charge both engines make.

Why: a DDP-style step launches each gradient bucket's all-reduce while backward goes on; NCCL's kernels then take
streaming multiprocessors and memory bandwidth from backward's, which runs slower for as long as a collective
overlaps it (:data:`distrepro.timing.framework.CONTENTION`, with its sources). The engines used to charge backward
as if it ran alone.

The rule, per worker, one ledger per clock (:class:`distrepro.engine.clock.VirtualClock`):

* a bucketed forward/backward opens a *backward* (:meth:`ContentionLedger.begin`) and closes it at its nominal
  end ``B`` (:meth:`ContentionLedger.end`); a non-blocking collective issued while one is open carries its tag;
* when such a collective is waited for, the part of it that overlapped that backward, ``min(end, B) − max(start,
  issue)``, adds ``factor`` × that to the backward's *debt* ``D``;
* backward really ended at ``B + D``, but time the worker spent waiting or communicating after ``B`` absorbed
  that much of the delay (the GPU's compute stream was free then): the worker owes ``D`` minus that slack, and is
  charged as compute whatever of it is not charged yet, before the wait moves its clock.

With DDP (the wait right after backward) the step then ends at ``max(B + D, last bucket's end)``; with Decent-DP's
overlap (a round's exchange waited for during the next step) the delay lands in the next step, as the late
backward pushes it on the real GPU. The launches keep their nominal times: a bucket is launched before the
collectives beside it have ended, so its ready time cannot yet include their delay (at most ``D`` left out of the
last bucket's end). The charge is a function of each worker's own clock and the collectives' (start, end), which
both engines compute identically, so the engines agree; the sensitivity replay
(:mod:`distrepro.sensitivity.analytic`) applies this same ledger.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: backwards remembered per worker (a collective is waited for within a step or, with Decent-DP, the next)
_KEPT = 8


@dataclass
class _Backward:
    end_s: float | None = None  # nominal end B, None while open
    slack_at_end: float = 0.0  # the worker's non-compute seconds (idle + communication) at B
    debt_s: float = 0.0  # D so far
    charged_s: float = 0.0  # what of it was charged as compute


@dataclass
class ContentionLedger:
    """One worker's open and recent backwards and what collectives overlapping them cost it (see the module)."""

    factor: float
    _count: int = 0
    _open: int | None = None
    _backwards: dict[int, _Backward] = field(default_factory=dict)

    def begin(self) -> None:
        """A bucketed backward starts: collectives issued from now on overlap it."""
        self._count += 1
        self._open = self._count
        self._backwards[self._count] = _Backward()
        for old in [k for k in self._backwards if k <= self._count - _KEPT]:
            del self._backwards[old]

    def end(self, t: float, slack_s: float) -> None:
        """The open backward ends at ``t``; the worker had spent ``slack_s`` seconds not computing so far."""
        if self._open is not None:
            entry = self._backwards[self._open]
            entry.end_s, entry.slack_at_end = t, slack_s
        self._open = None

    def tag(self) -> int | None:
        """The backward a collective issued now overlaps (None: none open, or contention pinned off)."""
        return self._open if self.factor > 0 else None

    def owed(self, tag: int | None, issue_s: float, start_s: float, end_s: float, t: float, slack_s: float) -> float:
        """Compute seconds to charge now, at clock ``t`` with ``slack_s`` non-compute seconds so far, as the
        collective ``[start_s, end_s]`` issued at ``issue_s`` during backward ``tag`` is waited for."""
        entry = self._backwards.get(tag) if tag is not None else None
        if entry is None:
            return 0.0
        closed = entry.end_s is not None
        backward_end = entry.end_s if entry.end_s is not None else t
        entry.debt_s += self.factor * max(0.0, min(end_s, backward_end) - max(start_s, issue_s))
        slack = max(0.0, slack_s - entry.slack_at_end) if closed else 0.0
        due = max(0.0, entry.debt_s - slack) - entry.charged_s
        if due <= 0:
            return 0.0
        entry.charged_s += due
        return due

    def state_dict(self) -> dict[str, Any]:
        return {
            "count": self._count,
            "open": self._open,
            "backwards": [[k, b.end_s, b.slack_at_end, b.debt_s, b.charged_s] for k, b in self._backwards.items()],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._count, self._open = int(state["count"]), state["open"]
        self._backwards = {int(k): _Backward(e, s, d, c) for k, e, s, d, c in state["backwards"]}
