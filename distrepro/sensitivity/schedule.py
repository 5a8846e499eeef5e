"""The order in which an iteration's collectives complete, worked out once per set of event lists.

Why: :meth:`distrepro.sensitivity.analytic._Clocks.run` used to match every rank's next collective across its
group at every iteration of every simulation, although which collective completes next depends only on the event
lists (the program order of each rank), never on the times. A report's hardware check replays each run at 30-odd
settings, 80 iterations each, over the same few event lists (the prober caches them per batch size), so the
matching was redone about a hundred thousand times for a few dozen distinct answers. :func:`schedule` computes it
once; :class:`Schedules` keeps it per event lists, keyed by the lists' identity (the prober's cached lists live as
long as the prober, and the key keeps them alive).

The schedule is what the loop that matched at run time did, step by step: the lowest rank whose next collective
every member of its group has reached goes first; each member plays its local events up to that collective, then
issues it (blocking when the member's event is ``comm``, else ``acomm``). A set of lists whose collectives never
match (a deadlock in the engine) yields, at the point where the old loop raised, a step that raises the same
:class:`~distrepro.sensitivity.probe.NotAnalysable`, so the replay fails exactly where and how it failed before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from distrepro.sensitivity.probe import Call, Event

#: a member of a collective: its rank, the local events it plays before issuing it, and whether it blocks
Member = tuple[int, tuple[Event, ...], bool]


@dataclass(frozen=True)
class Step:
    """One collective as it completes (``call``: the first matching rank's), or a deadlock (``error`` set)."""

    call: Call | None
    members: tuple[Member, ...] = ()
    error: str = ""


@dataclass(frozen=True)
class Schedule:
    """An iteration's collectives in completion order, then each rank's events after its last collective."""

    steps: tuple[Step, ...]
    tails: tuple[tuple[Event, ...], ...]


def _next_comm(events: Sequence[Event], start: int) -> int | None:
    for i in range(start, len(events)):
        if events[i][0] in ("comm", "acomm"):
            return i
    return None


def _matched(events: Sequence[Sequence[Event]], heads: list[int | None]) -> tuple[Call | None, list[int]]:
    """The next collective every member of its group has reached (the lowest rank's first), and the ranks still
    waiting on one (a deadlock when the call is None and some are)."""
    pending = [r for r, h in enumerate(heads) if h is not None]
    for r in pending:
        h = heads[r]
        assert h is not None  # r is pending
        call = events[r][h][1]
        if all(_waits_on(events, heads, m, call) for m in call.ranks):
            return call, pending
    return None, pending


def _waits_on(events: Sequence[Sequence[Event]], heads: list[int | None], rank: int, call: Call) -> bool:
    h = heads[rank]
    if h is None:
        return False
    other = events[rank][h][1]
    return bool(other.kind == call.kind and other.ranks == call.ranks)


def schedule(events: Sequence[Sequence[Event]]) -> Schedule:
    """The completion order of the collectives in ``events`` (one list per rank), as the replay plays them."""
    pos = [0] * len(events)
    heads = [_next_comm(ev, 0) for ev in events]
    steps: list[Step] = []
    while True:
        call, pending = _matched(events, heads)
        if call is None:
            if pending:
                steps.append(
                    Step(None, error=f"ranks {pending} wait on collectives that do not match across their groups")
                )
                return Schedule(tuple(steps), tuple(() for _ in events))
            break
        members: list[Member] = []
        for r in call.ranks:
            ev, h = events[r], heads[r]
            assert h is not None  # a matched call's members all have a head
            members.append((r, tuple(ev[pos[r] : h]), ev[h][0] == "comm"))
            pos[r] = h + 1
            heads[r] = _next_comm(ev, h + 1)
        steps.append(Step(call, tuple(members)))
    return Schedule(tuple(steps), tuple(tuple(ev[pos[r] :]) for r, ev in enumerate(events)))


class Schedules:
    """:func:`schedule` memoised on the identity of the per-rank event lists (kept alive by the memo)."""

    def __init__(self) -> None:
        self._memo: dict[tuple[int, ...], tuple[Sequence[Sequence[Event]], Schedule]] = {}

    def __call__(self, events: Sequence[Sequence[Event]]) -> Schedule:
        key = tuple(id(ev) for ev in events)
        hit = self._memo.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[0], events, strict=True)):
            return hit[1]
        made = schedule(events)
        self._memo[key] = (list(events), made)
        return made
