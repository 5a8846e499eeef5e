"""The contention charge of :mod:`distrepro.timing.contention`, for many settings of one run at once (lanes).

Why: the report's hardware check replays each run at 30-odd hardware settings, and a run's replay spends most of its
time settling each bucket's collective against the backward it overlapped (:class:`ContentionLedger.settle`, once
per wait of every rank at every iteration). :mod:`distrepro.sensitivity.lanes` replays the settings of a run
together, one NumPy array of the settings per quantity; this is the ledger it keeps per rank.

Every operation is the scalar ledger's, in the same order, on float64 arrays: IEEE arithmetic is the same per
element, so each lane holds bit for bit what the scalar ledger would. Branches become masks; Python's ``max(a, b)``
(``b`` only when ``b > a``) is :func:`pymax`, never ``np.maximum`` (which treats NaN and signed zeros otherwise).
Where the lanes would take different control paths that masks cannot express (a collective waited for again in
some lanes only, a tag that differs between lanes), :class:`Diverged` is raised and the caller replays the lanes one
by one with the scalar code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from distrepro.timing.contention import _KEPT

#: one setting per element
Lanes = np.ndarray
#: ``np.count_nonzero`` of a whole array: the int it returns without an axis
_count = cast(Callable[[Lanes], int], np.count_nonzero)


class Diverged(Exception):
    """The lanes stopped following one control path: replay them one at a time (the scalar code)."""


class Split(Diverged):
    """The lanes part ways from their first iteration on (their allocations give iterations of other shapes): replay
    each of ``groups`` (lane indices) as lanes of its own."""

    def __init__(self, groups: list[list[int]]) -> None:
        super().__init__(f"the settings' first iterations have {len(groups)} shapes")
        self.groups = groups


def pymax(a: Lanes | float, b: Lanes | float) -> Lanes:
    """Python's ``max(a, b)`` per lane: ``b`` where ``b > a``, else ``a``."""
    return np.where(b > a, b, a)


def slowed_finish(
    begin: Lanes, work: Lanes, starts: Lanes, ends: Lanes, valid: Lanes | None, factor: Lanes | float
) -> Lanes:
    """:func:`distrepro.timing.framework.slowed_finish_s` per lane: ``starts``/``ends`` are ``(spans, lanes)``, each
    lane's spans in that lane's order, a span counted in a lane only where ``valid`` (``None``: every span). Run under
    ``np.errstate(all="ignore")`` (as :func:`~distrepro.sensitivity.lanes.simulate_lanes` does): values of lanes a
    mask leaves out are computed and dropped.

    Called twice per wait of every rank (most of a replay's time), so a mask that holds in every lane takes the
    value itself rather than ``np.where`` (the same elements), and the loop stops once every lane has ended (the
    scalar code returns there; later spans change nothing)."""
    t = begin
    left = pymax(0.0, work)
    out = left  # every lane either ends inside the loop (and is set) or is still active at the end
    active = np.ones(t.shape, dtype=bool)
    lanes = live = active.size
    slow = 1.0 + factor
    any_ = _count
    for j, (s, e) in enumerate(zip(starts, ends, strict=True)):
        here = active if valid is None else active & valid[j]
        idle = here & (s > t)
        n_idle = any_(idle)
        if n_idle:
            gap = s - t
            short = idle & (gap >= left)
            n_short = any_(short)
            if n_short:
                out = np.where(short, t + left, out)
                active = active & ~short
                idle = idle & ~short
                n_idle, live = n_idle - n_short, live - n_short
            if n_idle == lanes:
                left, t = left - gap, s
            elif n_idle:
                left = np.where(idle, left - gap, left)
                t = np.where(idle, s, t)
        if not live:
            return out
        overlap = (active if valid is None else active & valid[j]) & ~(e <= t)
        n_over = any_(overlap)
        if not n_over:
            continue
        done = (e - t) / slow
        ends_here = overlap & (done >= left)
        n_end = any_(ends_here)
        if n_end:
            out = np.where(ends_here, t + left * slow, out)
            active = active & ~ends_here
            overlap = overlap & ~ends_here
            n_over, live = n_over - n_end, live - n_end
            if not live:
                return out
        if n_over == lanes:
            left, t = left - done, e
        elif n_over:
            left = np.where(overlap, left - done, left)
            t = np.where(overlap, e, t)
    return t + left if live == lanes else np.where(active, t + left, out)


def _sorted_spans(starts: list[Lanes], ends: list[Lanes], valid: Lanes | None) -> tuple[Lanes, Lanes, Lanes | None]:
    """``sorted((s, e) ...)`` per lane over the valid spans (``None``: all), the others after them (and left out by
    their mask). Spans already in order in every lane (a stream's buckets, issued and moved in turn) are taken as
    they are: sorting them would give them back unchanged."""
    s, e = np.array(starts), np.array(ends)
    if len(starts) < 2 and valid is None:
        return s, e, valid
    if valid is None or np.count_nonzero(valid) == valid.size:
        a, b = s[:-1], s[1:]
        if np.count_nonzero((a < b) | ((a == b) & (e[:-1] <= e[1:]))) == a.size:
            return s, e, None
    ok = np.ones(s.shape, dtype=bool) if valid is None else valid
    key_s, key_e = np.where(ok, s, np.inf), np.where(ok, e, np.inf)
    order = np.lexsort((key_e, key_s), axis=0)
    take = np.take_along_axis
    return take(s, order, axis=0), take(e, order, axis=0), take(ok, order, axis=0)


@dataclass
class _Backward:
    begin: Lanes
    end: Lanes | None = None
    slack_at_end: Lanes | float = 0.0
    #: (issue, start, end, moved start, moved end) of its collectives as waited for
    busy: list[tuple[Lanes, Lanes, Lanes, Lanes, Lanes]] = field(default_factory=list)
    charged: Lanes | float = 0.0


class LaneLedger:
    """:class:`distrepro.timing.contention.ContentionLedger` over lanes (one worker, every setting)."""

    def __init__(self, factor: Lanes) -> None:
        on = factor > 0
        if on.any() and not on.all():
            raise Diverged("contention pinned off in some settings only")
        self.factor, self.on = factor, bool(on.all())
        self._count = 0
        self._open: int | None = None
        self._backwards: dict[int, _Backward] = {}

    def begin(self, t: Lanes) -> None:
        self._count += 1
        self._open = self._count
        self._backwards[self._count] = _Backward(t)
        for old in [k for k in self._backwards if k <= self._count - _KEPT]:
            del self._backwards[old]

    def end(self, t: Lanes, slack: Lanes) -> None:
        if self._open is not None:
            entry = self._backwards[self._open]
            entry.end, entry.slack_at_end = t, slack
        self._open = None

    def tag(self, t: Lanes) -> int | None:
        if not self.on:
            return None
        if self._open is not None:
            return self._open
        last = self._backwards.get(self._count)
        if last is None or last.end is None:
            return None
        same = np.count_nonzero(last.end == t)
        if same == len(t):
            return self._count
        if same:
            raise Diverged("a collective belongs to a backward in some settings only")
        return None

    def _repeat(self, entry: _Backward, issue: Lanes, start: Lanes, end: Lanes) -> tuple[Lanes, Lanes] | None:
        """The moved span of a collective waited for before (in every lane), None when it is new in every lane."""
        for issued, s, e, moved_s, moved_e in entry.busy:
            same = np.count_nonzero((issued == issue) & (s == start) & (e == end))
            if same == len(issue):
                return moved_s, moved_e
            if same:
                raise Diverged("a collective waited for again in some settings only")
        return None

    def settle(
        self, tag: int | None, issue: Lanes, start: Lanes, end: Lanes, t: Lanes, slack: Lanes
    ) -> tuple[Lanes | float, Lanes, Lanes]:
        """:meth:`ContentionLedger.settle` per lane: (compute seconds to charge now, moved start, moved end)."""
        entry = self._backwards.get(tag) if tag is not None else None
        if entry is None:
            return 0.0, start, end
        again = self._repeat(entry, issue, start, end)
        if again is not None:
            return 0.0, again[0], again[1]
        busy = entry.busy
        if busy:
            before = np.array([b[0] <= issue for b in busy])
            s_, e_, ok = _sorted_spans([b[3] for b in busy], [b[4] for b in busy], before)
        else:
            s_ = e_ = np.zeros((0, len(issue)))
            ok = None
        launch = slowed_finish(entry.begin, issue - entry.begin, s_, e_, ok, self.factor)
        latest, seen = start, np.zeros(start.shape, dtype=bool)
        for j, e in enumerate(e_):  # max(ends of the earlier ones, default=start), in sorted order
            valid = ok[j] if ok is not None else True
            latest = np.where(valid & (~seen | (e > latest)), e, latest)
            seen = seen | valid
        moved = pymax(pymax(start, launch), latest) - start
        entry.busy.append((issue, start, end, start + moved, end + moved))
        start, end = start + moved, end + moved
        closed = entry.end is not None
        nominal = entry.end if entry.end is not None else t - entry.charged
        spans_s, spans_e, _ = _sorted_spans([b[3] for b in entry.busy], [b[4] for b in entry.busy], None)
        debt = slowed_finish(entry.begin, nominal - entry.begin, spans_s, spans_e, None, self.factor) - nominal
        free = pymax(0.0, slack - entry.slack_at_end) if closed else 0.0
        due = pymax(0.0, debt - free) - entry.charged
        owed = ~(due <= 0)
        entry.charged = np.where(owed, entry.charged + due, entry.charged)
        return np.where(owed, due, 0.0), start, end
