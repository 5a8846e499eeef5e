"""The in-process watchdog tells a stuck step from a slow one: a blocked call fails at ``timeout_s`` of wall time,
an endless loop at ``timeout_s`` of CPU, and a step that is computing on a loaded machine is left to finish."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator

import pytest

from distrepro.engine.inprocess.watchdog import NoProgress, Watchdog


@pytest.fixture(autouse=True)
def _alarm_free() -> Iterator[None]:
    """pytest-timeout's signal method owns SIGALRM, and the watchdog stands aside where another owner has it: lend
    the signal to the test (every wait below is bounded), then give the timer and its handler back."""
    handler, timer = signal.getsignal(signal.SIGALRM), signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    try:
        yield
    finally:
        signal.signal(signal.SIGALRM, handler)
        if timer[0] > 0:
            signal.setitimer(signal.ITIMER_REAL, *timer)


def _busy(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


@pytest.mark.smoke
def test_a_blocked_step_fails_at_the_timeout() -> None:
    dog = Watchdog(0.3)
    # a wait that returned at its own end would raise nothing: the NoProgress proves it was interrupted
    with pytest.raises(NoProgress, match=r"no worker made progress for 0.3 s"), dog.armed():
        threading.Event().wait(600)


@pytest.mark.smoke
def test_an_endless_loop_fails_once_it_has_used_the_timeout_in_cpu() -> None:
    dog = Watchdog(0.3)
    with pytest.raises(NoProgress), dog.armed():
        _busy(30)


@pytest.mark.smoke
def test_a_step_slowed_by_the_load_is_left_to_finish() -> None:
    """A step that gets a fifth of a core, as on a loaded machine: 0.18 s of CPU spread over at least 0.9 s of wall
    time, three times the timeout. A wall-clock watchdog failed it; it computes, so it is let finish."""
    dog = Watchdog(0.3)
    start = time.monotonic()
    with dog.armed():
        for _ in range(18):
            _busy(0.01)
            time.sleep(0.04)
    assert time.monotonic() - start > 0.3 and not dog.fired
