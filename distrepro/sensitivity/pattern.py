"""How a rank's iteration scales with its batch size, learnt from two probes and spot-checked.

A method that re-allocates for every hardware setting (C-ADP's solver gives every device a new
round size B_j) would need a fresh probe of ``train_step`` per setting and rank, and a probe runs
the method's real optimizer steps: on a loaded host that was most of a sweep's time. Lockstep
methods' iterations scale with the batch in one of two simple ways:

* **whole batch**: one compute call of n samples (AR-SGD, Chao's split, ZeRO; with DDP-style overlap the
  call is an ``("fb", n)`` event followed by the same bucket events for every n), or
* **micro-batches**: ``ceil(n / m)`` compute calls of m samples, the last one the remainder (C-ADP's
  local steps over its round),

with the same collectives (same kind, group and bytes) around that block of compute. When two
probes at different sizes agree with one of these, :class:`Pattern` predicts the events for any
other size. A prediction is only a shortcut: :class:`~distrepro.sensitivity.probe.Prober` checks
every ``VERIFY_EVERY``-th one against a real probe and stops predicting for that rank at the first
mismatch, so a method that scales otherwise is still probed size by size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: one prediction in this many is checked against a real probe
VERIFY_EVERY = 25

Event = tuple[str, Any]


#: events whose value is a sample count
_COMPUTE = ("compute", "fb")


def _split(events: list[Event]) -> tuple[list[Event], list[int], list[Event], str] | None:
    """(events before, compute sizes, events after, their kind) when all compute calls are one contiguous
    block of one kind."""
    idx = [i for i, e in enumerate(events) if e[0] in _COMPUTE]
    if not idx or idx != list(range(idx[0], idx[-1] + 1)) or len({events[i][0] for i in idx}) > 1:
        return None
    return events[: idx[0]], [int(events[i][1]) for i in idx], events[idx[-1] + 1 :], events[idx[0]][0]


def _chunked(sizes: list[int], n: int, m: int) -> bool:
    """True if ``sizes`` is n cut into chunks of m, the remainder last."""
    return m > 0 and sum(sizes) == n and len(sizes) == -(-n // m) and all(s == m for s in sizes[:-1])


@dataclass(frozen=True)
class Pattern:
    """Events of a rank for a batch size n > 0: ``before`` + compute block + ``after``.

    A whole-batch pattern is trusted only up to the largest size seen as one call (``upto``): two
    single calls of 3 and 5 samples cannot tell "whole batch" from "micro-batches of 64"."""

    before: tuple[Event, ...]
    after: tuple[Event, ...]
    micro: int | None  # None: one call of the whole batch
    upto: int = 0
    kind: str = "compute"  # "fb": a forward/backward whose buckets are the events after it

    def covers(self, n: int) -> bool:
        return n > 0 and (self.micro is not None or n <= self.upto)

    def events(self, n: int) -> list[Event]:
        if self.micro is None:
            block = [(self.kind, n)]
        else:
            full, rest = divmod(n, self.micro)
            block = [("compute", self.micro)] * full + ([("compute", rest)] if rest else [])
        return [*self.before, *block, *self.after]


def infer(a: tuple[int, list[Event]], b: tuple[int, list[Event]]) -> Pattern | None:
    """The pattern two probes ``(n, events)`` at different sizes n > 0 share, if any."""
    (na, ea), (nb, eb) = a, b
    sa, sb = _split(ea), _split(eb)
    if na == nb or sa is None or sb is None or sa[0] != sb[0] or sa[2] != sb[2] or sa[3] != sb[3]:
        return None
    if sa[1] == [na] and sb[1] == [nb]:
        return Pattern(tuple(sa[0]), tuple(sa[2]), None, max(na, nb), sa[3])
    if sa[3] != "compute":
        return None
    several = [sizes for sizes in (sa[1], sb[1]) if len(sizes) > 1]  # only a split batch shows m
    m = several[0][0] if several else 0
    if several and _chunked(sa[1], na, m) and _chunked(sb[1], nb, m):
        return Pattern(tuple(sa[0]), tuple(sa[2]), m)
    return None
