"""The contention ledger (distrepro/timing/contention.py) on a clock, against step times worked out by hand.

The rule: backward runs 1 + f times slower while one of its collectives is on the stream, so a span of d seconds
beside it delays it by d·f/(1 + f); a collective cannot start before the slowed backward launched it."""

from __future__ import annotations

import pytest

from distrepro.engine.clock import VirtualClock
from distrepro.timing.contention import ContentionLedger
from distrepro.timing.framework import slowed_finish_s


def _clock(factor: float) -> VirtualClock:
    clock = VirtualClock(0)
    clock.contention = ContentionLedger(factor)
    return clock


def _backward_issuing_midway(clock: VirtualClock, half_s: float) -> object:
    """A backward of 2 × ``half_s`` that issues one collective halfway through; returns its backward tag."""
    clock.begin_backward()
    clock.compute(half_s)
    tag = clock.backward_tag()
    clock.compute(half_s)
    clock.end_backward()
    return tag


def test_slowed_compute_finishes_late_by_the_overlap_times_f_over_one_plus_f() -> None:
    assert slowed_finish_s(0.0, 1.0, [], 0.1) == 1.0
    assert slowed_finish_s(0.0, 1.0, [(0.5, 0.7)], 0.1) == pytest.approx(1.0 + 0.2 * 0.1 / 1.1)
    assert slowed_finish_s(0.0, 1.0, [(0.5, 3.0)], 0.1) == pytest.approx(0.5 + 0.5 * 1.1)  # overlapped to its end
    assert slowed_finish_s(0.0, 1.0, [(2.0, 3.0)], 0.4) == 1.0  # after it: no delay


def test_the_last_bucket_launches_when_the_slowed_backward_ends() -> None:
    """Backward 0-1 s; bucket 0 issued at 0.5 runs 0.5-0.7, so backward ends at 1 + 0.2·0.1/1.1 = 1.01818; bucket 1,
    issued at the nominal end 1.0, is moved to start there: the step ends 18 ms after its nominal end, whether the
    step is compute-bound (bucket 1 to 1.05) or communication-bound (to 1.5)."""
    delay = 0.2 * 0.1 / 1.1
    for last_end in (1.05, 1.5):
        clock = _clock(0.1)
        first = _backward_issuing_midway(clock, 0.5)
        second = clock.backward_tag()  # issued as backward ends: DDP's last bucket
        assert first is not None and second == first
        clock.finish_op(0.5, 0.7, first, 0.5)
        clock.finish_op(1.0, last_end, second, 1.0)
        assert clock.t == pytest.approx(last_end + delay)
        assert clock.compute_s == pytest.approx(1.0 + delay)
        assert clock.comm_s == pytest.approx(last_end - 1.0)


def test_factor_zero_moves_nothing() -> None:
    clock = _clock(0.0)
    tag = _backward_issuing_midway(clock, 0.5)
    assert tag is None and clock.backward_tag() is None
    clock.finish_op(0.5, 0.7, tag, 0.5)
    clock.finish_op(1.0, 1.5, None, 1.0)
    assert clock.t == 1.5 and clock.compute_s == 1.0


def test_waiting_after_backward_absorbs_the_delay() -> None:
    """A collective issued at 0.5 that outlasts backward (to 2.0): the last 0.5 s of backward ran 1.1 times slower,
    50 ms of delay, all of it hidden in the wait; waiting on it again owes nothing more."""
    clock = _clock(0.1)
    tag = _backward_issuing_midway(clock, 0.5)
    clock.finish_op(0.5, 2.0, tag, 0.5)
    assert clock.t == pytest.approx(2.0) and clock.compute_s == pytest.approx(1.05)  # delay charged, then the wait
    assert clock.comm_s == pytest.approx(0.95)
    clock.finish_op(0.5, 2.0, tag, 0.5)
    assert clock.t == pytest.approx(2.0)


def test_a_collective_waited_in_the_next_step_delays_that_step() -> None:
    """Decent-DP's overlap: issued at 0.5 during backward 0-1 and done at 0.8, waited at 1.6 in the next step
    without any wait between: the 0.3·0.1/1.1 s delay lands there."""
    clock = _clock(0.1)
    tag = _backward_issuing_midway(clock, 0.5)
    clock.compute(0.6)  # the next forward and part of backward
    clock.finish_op(0.5, 0.8, tag, 0.5)
    assert clock.t == pytest.approx(1.6 + 0.03 / 1.1) and clock.compute_s == pytest.approx(clock.t)


def test_a_bucket_queued_behind_a_moved_one_moves_with_it() -> None:
    """Two buckets issued at 0.5 and 0.8 (0.5-0.9 and 0.9-1.0 nominally, one stream): bucket 0 slows backward so
    bucket 1 is launched at 0.8 + 0.3·0.1/1.1, still before bucket 0's end: it stays behind it, unmoved."""
    clock = _clock(0.1)
    clock.begin_backward()
    clock.compute(0.5)
    first = clock.backward_tag()
    clock.compute(0.3)
    second = clock.backward_tag()
    clock.compute(0.2)
    clock.end_backward()
    clock.finish_op(0.5, 0.9, first, 0.5)
    clock.finish_op(0.9, 1.0, second, 0.8)
    # the stream busy 0.5-1.0 beside backward: 0.5 s of it, 45 ms late; bucket 1 ends at 1.0, before backward
    assert clock.t == pytest.approx(slowed_finish_s(0.0, 1.0, [(0.5, 0.9), (0.9, 1.0)], 0.1))
    assert clock.t == pytest.approx(1.0 + 0.5 * 0.1 / 1.1)


def test_the_ledger_survives_a_checkpoint() -> None:
    clock = _clock(0.2)
    tag = _backward_issuing_midway(clock, 1.0)
    restored = _clock(0.2)
    restored.load_state_dict(clock.state_dict())
    restored.finish_op(1.0, 1.5, tag, 1.0)
    clock.finish_op(1.0, 1.5, tag, 1.0)
    assert restored.t == clock.t == pytest.approx(2.0 + 0.5 * 0.2 / 1.2)
    again = _clock(0.2)
    again.load_state_dict(clock.state_dict())  # spans kept: a second wait owes nothing
    again.finish_op(1.0, 1.5, tag, 1.0)
    assert (again.t, again.compute_s) == (clock.t, clock.compute_s)
