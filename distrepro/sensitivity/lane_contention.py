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

from dataclasses import dataclass, field

import numpy as np

from distrepro.timing.contention import _KEPT

#: one setting per element
Lanes = np.ndarray


class Diverged(Exception):
    """The lanes stopped following one control path: replay them one at a time (the scalar code)."""


def pymax(a: Lanes | float, b: Lanes | float) -> Lanes:
    """Python's ``max(a, b)`` per lane: ``b`` where ``b > a``, else ``a``."""
    return np.where(b > a, b, a)


def slowed_finish(
    begin: Lanes, work: Lanes, starts: Lanes, ends: Lanes, valid: Lanes, factor: Lanes | float
) -> Lanes:
    """:func:`distrepro.timing.framework.slowed_finish_s` per lane: ``starts``/``ends`` are ``(spans, lanes)``, each
    lane's spans in that lane's order, a span counted in a lane only where ``valid``."""
    t = begin
    left = pymax(0.0, work)
    out = np.zeros_like(t)
    active = np.ones(t.shape, dtype=bool)
    slow = 1.0 + factor
    with np.errstate(all="ignore"):  # values of lanes a mask leaves out are computed and dropped
        for s, e, ok in zip(starts, ends, valid, strict=True):
            here = active & ok
            idle = here & (s > t)
            short = idle & (s - t >= left)
            out = np.where(short, t + left, out)
            active &= ~short
            idle &= ~short
            left = np.where(idle, left - (s - t), left)
            t = np.where(idle, s, t)
            overlap = active & ok & ~(e <= t)
            done = (e - t) / slow
            ends_here = overlap & (done >= left)
            out = np.where(ends_here, t + left * slow, out)
            active &= ~ends_here
            overlap &= ~ends_here
            left = np.where(overlap, left - done, left)
            t = np.where(overlap, e, t)
        return np.where(active, t + left, out)


def _sorted_spans(starts: list[Lanes], ends: list[Lanes], valid: Lanes) -> tuple[Lanes, Lanes, Lanes]:
    """``sorted((s, e) ...)`` per lane over the valid spans, the others after them (and left out by ``valid``)."""
    s, e = np.array(starts), np.array(ends)
    key_s, key_e = np.where(valid, s, np.inf), np.where(valid, e, np.inf)
    order = np.lexsort((key_e, key_s), axis=0)
    take = np.take_along_axis
    return take(s, order, axis=0), take(e, order, axis=0), take(valid, order, axis=0)


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
        same = last.end == t
        if same.all():
            return self._count
        if same.any():
            raise Diverged("a collective belongs to a backward in some settings only")
        return None

    def _repeat(self, entry: _Backward, issue: Lanes, start: Lanes, end: Lanes) -> tuple[Lanes, Lanes] | None:
        """The moved span of a collective waited for before (in every lane), None when it is new in every lane."""
        for issued, s, e, moved_s, moved_e in entry.busy:
            same = (issued == issue) & (s == start) & (e == end)
            if same.all():
                return moved_s, moved_e
            if same.any():
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
        before = [(s, e, issued <= issue) for issued, _, _, s, e in entry.busy]
        if before:
            s_, e_, ok = _sorted_spans([b[0] for b in before], [b[1] for b in before], np.array([b[2] for b in before]))
        else:
            s_ = e_ = np.zeros((0, len(issue)))
            ok = np.zeros((0, len(issue)), dtype=bool)
        launch = slowed_finish(entry.begin, issue - entry.begin, s_, e_, ok, self.factor)
        latest, seen = start, np.zeros(start.shape, dtype=bool)
        for e, valid in zip(e_, ok, strict=True):  # max(ends of the earlier ones, default=start), in sorted order
            latest = np.where(valid & (~seen | (e > latest)), e, latest)
            seen = seen | valid
        moved = pymax(pymax(start, launch), latest) - start
        entry.busy.append((issue, start, end, start + moved, end + moved))
        start, end = start + moved, end + moved
        closed = entry.end is not None
        nominal = entry.end if entry.end is not None else t - entry.charged
        everything = np.ones((len(entry.busy), len(issue)), dtype=bool)
        spans_s, spans_e, _ = _sorted_spans([b[3] for b in entry.busy], [b[4] for b in entry.busy], everything)
        debt = slowed_finish(entry.begin, nominal - entry.begin, spans_s, spans_e, everything, self.factor) - nominal
        free = pymax(0.0, slack - entry.slack_at_end) if closed else 0.0
        due = pymax(0.0, debt - free) - entry.charged
        owed = ~(due <= 0)
        entry.charged = np.where(owed, entry.charged + due, entry.charged)
        return np.where(owed, due, 0.0), start, end
