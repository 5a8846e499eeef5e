"""The contention ledger (distrepro/engine/contention.py) on a clock, against step times worked out by hand."""

from __future__ import annotations

import pytest

from distrepro.engine.clock import VirtualClock
from distrepro.engine.contention import ContentionLedger


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


def test_ddp_step_ends_at_backward_plus_the_delay_or_the_last_bucket() -> None:
    """Backward 0-1 s; bucket 0 issued at 0.5 runs 0.5-0.7 (0.2 s overlapped), bucket 1 issued at 1.0 runs
    1.0-1.05: backward ends at 1.0 + 0.1 × 0.2 = 1.02 (compute-bound); with bucket 1 to 1.5 the step ends at 1.5."""
    for last_end, expected, compute in ((1.05, 1.05, 1.02), (1.5, 1.5, 1.02)):
        clock = _clock(0.1)
        first = _backward_issuing_midway(clock, 0.5)
        second = clock.backward_tag()  # issued after backward: overlaps none of it
        assert first is not None and second is None
        clock.finish_op(0.5, 0.7, first, 0.5)
        clock.finish_op(1.0, last_end, second, 1.0)
        assert clock.t == pytest.approx(max(expected, 1.02))
        assert clock.compute_s == pytest.approx(compute)


def test_waiting_after_backward_absorbs_the_delay() -> None:
    """A collective issued at 0.5 that outlasts backward (to 2.0): 0.5 s overlapped, 50 ms of delay, all of it
    hidden in the wait; a second wait later on the same backward owes nothing more."""
    clock = _clock(0.1)
    tag = _backward_issuing_midway(clock, 0.5)
    clock.finish_op(0.5, 2.0, tag, 0.5)
    assert clock.t == pytest.approx(2.0) and clock.compute_s == pytest.approx(1.05)  # delay charged, then the wait
    assert clock.comm_s == pytest.approx(0.95)
    clock.finish_op(0.5, 2.0, tag, 0.5)
    assert clock.t == pytest.approx(2.0)


def test_a_collective_waited_in_the_next_step_delays_that_step_and_factor_zero_charges_nothing() -> None:
    """Decent-DP's overlap: issued at 0.5 during backward 0-1 and done at 0.8, waited at 1.6 in the next step
    without any wait between: the 30 ms delay lands there. Contention pinned off: no tag, nothing charged."""
    clock = _clock(0.1)
    tag = _backward_issuing_midway(clock, 0.5)
    clock.compute(0.6)  # the next forward and part of backward
    clock.finish_op(0.5, 0.8, tag, 0.5)
    assert clock.t == pytest.approx(1.63) and clock.compute_s == pytest.approx(1.63)
    off = _clock(0.0)
    off.begin_backward()
    assert off.backward_tag() is None


def test_the_ledger_survives_a_checkpoint() -> None:
    clock = _clock(0.2)
    tag = _backward_issuing_midway(clock, 1.0)
    restored = _clock(0.2)
    restored.load_state_dict(clock.state_dict())
    restored.finish_op(1.0, 1.5, tag, 1.0)
    clock.finish_op(1.0, 1.5, tag, 1.0)
    assert restored.t == clock.t == pytest.approx(2.1)
