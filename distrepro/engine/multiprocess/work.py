"""Handles of the distributed engine's non-blocking operations, and the clock packing they carry.

:class:`DistWork` completes an operation's math and its virtual times at ``wait()`` (``torch.distributed``
semantics: inputs were taken at issue); :class:`PairWork` is a non-blocking gossip pairing's handle. The
clock helpers pack a rank's float64 virtual clock into a collective's payload (see
:mod:`distrepro.engine.multiprocess.comm`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import torch

from distrepro.engine.clock import VirtualClock
from distrepro.timing.charges import payload_bytes


class LaneOwner(Protocol):
    """What a pending operation needs of the rank's ``DistComm`` (:mod:`distrepro.engine.multiprocess.comm`, which
    builds these operations, so they name it through this view): its clock, the last unresolved operation of each
    lane, the capture of charges, and applying a charge."""

    clock: VirtualClock
    _lanes: dict[Any, DistWork]
    _capture: list[tuple[float, float, int]] | None

    def _apply(
        self, start: float, end: float, sent: int, backward: int | None = None, issue_s: float = 0.0
    ) -> None: ...


nbytes_of = payload_bytes  # the name the dist engine uses


def clock_slots(t: float, index: int, size: int, dtype: torch.dtype) -> torch.Tensor:
    slots = torch.zeros(2 * size, dtype=dtype)
    hi = torch.tensor(t, dtype=torch.float32).item()
    slots[2 * index] = hi
    slots[2 * index + 1] = t - hi
    return slots


def clocks_from(slots: torch.Tensor) -> list[float]:
    s = slots.double().cpu()
    return [float(s[2 * i] + s[2 * i + 1]) for i in range(s.numel() // 2)]


class DistWork:
    """Handle of a non-blocking distributed operation; ``wait()`` finishes the math and the clock.

    Lanes (:mod:`distrepro.engine.inprocess.lanes`): an operation starts no earlier than the end of the previous one on
    its lane (its group, or its pair), so resolving its times first resolves the previous one's. The
    dist engine's times ignore flows of *other* lanes: a rank cannot know, without a global exchange, what
    flows other ranks have on a shared NIC, so here every flow runs at its own cap (the charge alone): a
    lower bound where flows overlap (:mod:`distrepro.engine.multiprocess.comm`). Exact agreement with the in-process
    engine
    holds whenever no two flows overlap on a resource.
    """

    def __init__(self, comm: LaneOwner, finish: Callable[[], None], work: Any, lane: Any = None) -> None:
        self._comm, self._finish, self._work, self._done = comm, finish, work, False
        self.issue_s = comm.clock.t
        self.start_s = self.end_s = float("nan")
        self.value: Any = None
        self._sent = 0
        self._resolved = False
        #: the backward this collective overlaps (a group's lane only: a pair's swap contends with nothing charged)
        self.backward = comm.clock.backward_tag() if isinstance(lane, tuple) and lane[:1] == ("g",) else None
        self.prev: DistWork | None = comm._lanes.get(lane)
        self.lane = lane
        if lane is not None:
            comm._lanes[lane] = self

    def is_completed(self) -> bool:
        return self._done

    def resolve(self) -> None:
        """Finish the transfer and compute (start, end) without touching the clock."""
        if self._resolved:
            return
        lane_free = -float("inf")
        if self.prev is not None:
            self.prev.resolve()
            lane_free = self.prev.end_s
            self.prev = None
        if self._work is not None:
            self._work.wait()
        captured: list[tuple[float, float, int]] = []
        self._comm._capture = captured
        try:
            self._finish()
        finally:
            self._comm._capture = None
        start, seconds, self._sent = captured[-1] if captured else (self.issue_s, 0.0, 0)
        self.start_s = max(start, lane_free)
        self.end_s = self.start_s + seconds
        self._resolved = True
        if self._comm._lanes.get(self.lane) is self:
            del self._comm._lanes[self.lane]

    def wait(self) -> None:
        if not self._done:
            self.resolve()
            self._comm._apply(self.start_s, self.end_s, self._sent, self.backward, self.issue_s)
            self._done = True

    def result(self) -> Any:
        return self.value


def returned(handle: DistWork, async_op: bool) -> DistWork | None:
    """``torch.distributed``'s convention: a non-blocking call returns its handle, a blocking one waits."""
    if async_op:
        return handle
    handle.wait()
    return None


class PairWork:
    """A non-blocking pairing's handle: ``wait()`` fetches the coordinator's answer, then idles the clock
    until the pairing (``start_s = end_s``: pairing itself is free), as in-process."""

    def __init__(self, clock: VirtualClock, issue_s: float, answer: Callable[[], tuple[int | None, float]]) -> None:
        self._clock, self._answer = clock, answer
        self.issue_s = issue_s
        self.start_s = self.end_s = float("nan")
        self._value: int | None = None
        self._done = False

    def is_completed(self) -> bool:
        return self._done

    def wait(self) -> None:
        if not self._done:
            peer, t = self._answer()
            self._value = peer
            self.start_s = self.end_s = max(self.issue_s, t) if peer is not None else self.issue_s
            self._clock.idle_until(self.end_s)
            self._done = True

    def result(self) -> Any:
        return self._value
