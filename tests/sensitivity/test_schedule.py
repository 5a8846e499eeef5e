"""The replay's collective schedule: computed once per event lists, the same order the run-time matching gave."""

from __future__ import annotations

import pytest

from distrepro.sensitivity.probe import Call
from distrepro.sensitivity.schedule import Schedules, schedule

pytestmark = pytest.mark.smoke

AR_ALL = Call("all_reduce", (0, 1, 2), 400.0)
AR_01 = Call("all_reduce", (0, 1), 100.0)
AR_12 = Call("all_reduce", (1, 2), 100.0)


def test_collectives_complete_lowest_ready_rank_first_with_each_members_local_events() -> None:
    events = [
        [("compute", 4), ("comm", AR_01), ("compute", 2), ("comm", AR_ALL)],
        [("compute", 4), ("comm", AR_01), ("comm", AR_12), ("comm", AR_ALL), ("compute", 1)],
        [("compute", 8), ("acomm", AR_12), ("comm", AR_ALL), ("wait", 0)],
    ]
    plan = schedule(events)
    assert [s.call for s in plan.steps] == [AR_01, AR_12, AR_ALL]
    assert plan.steps[0].members == ((0, (("compute", 4),), True), (1, (("compute", 4),), True))
    # rank 2 issues its non-blocking all-reduce after its compute; rank 1 blocks on it
    assert plan.steps[1].members == ((1, (), True), (2, (("compute", 8),), False))
    assert plan.steps[2].members == ((0, (("compute", 2),), True), (1, (), True), (2, (), True))
    assert plan.tails == ((), (("compute", 1),), (("wait", 0),))


def test_the_first_matching_ranks_call_is_the_one_charged() -> None:
    mine, theirs = Call("all_reduce", (0, 1), 100.0), Call("all_reduce", (0, 1), 999.0)
    plan = schedule([[("comm", mine)], [("comm", theirs)]])
    assert plan.steps[0].call is mine


def test_a_deadlock_is_a_step_that_raises_where_the_matching_failed() -> None:
    events = [[("compute", 1), ("comm", AR_01)], [("comm", AR_12)], [("comm", AR_12)], []]
    plan = schedule([events[0], events[1], events[3]])
    assert plan.steps[-1].call is None
    assert plan.steps[-1].error == "ranks [0, 1] wait on collectives that do not match across their groups"


def test_no_collective_leaves_every_event_in_the_tails() -> None:
    events = [[("compute", 3)], [("compute", 5), ("compute", 1)]]
    plan = schedule(events)
    assert plan.steps == ()
    assert plan.tails == ((("compute", 3),), (("compute", 5), ("compute", 1)))


def test_schedules_memoise_on_the_identity_of_the_event_lists() -> None:
    a, b = [("comm", AR_01)], [("comm", AR_01)]
    plans = Schedules()
    first = plans([a, b])
    assert plans([a, b]) is first
    assert plans([list(a), list(b)]) is not first  # equal but other lists: computed afresh
    assert plans([list(a), list(b)]) == first
