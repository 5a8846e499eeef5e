"""Which step of a report is running, with its count and an estimate of the rest, for the lines a report prints.

A reproduction's report stage (reading every run, the hardware check, judging, drawing, writing) ran for minutes
printing only ``[alive] report for chao``. Each step now names itself here as it starts, and counts its units where
it has some (claims judged, figures drawn, hardware settings re-timed, files written), so that the heartbeat reads
``[alive 3m25s] report for chao: step 4 of 7, drawing the figures: 3 of 10 figures done, about 40 s left (1m02s in
this step)``. The tracker is :class:`distrepro.orchestration.heartbeat.Steps`; inside :func:`watch` (the reproduction,
``distrepro report``) the heartbeat prints it, and in the reproduction every step also prints a line as it starts;
outside it (a library call, a test) nothing is printed. One process builds one report at a time, so a module-level
tracker is enough.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from distrepro.orchestration.heartbeat import Steps, watched

#: the report's steps, in order: what :func:`enter` numbers them by
STEPS = (
    "reading the runs",
    "the hardware check",
    "judging",
    "drawing the figures",
    "the method's sections",
    "writing the report",
    "logging to MLflow",
)

tracker = Steps(steps=STEPS)  # silent: :func:`watch` puts one that prints in its place


def enter(step: str, detail: str = "", total: int = 0, unit: str = "") -> None:
    """Step ``step`` (one of :data:`STEPS`, or a step of the caller's) starts; ``detail`` says what it works on;
    ``total`` units of ``unit`` (``figure``) are to be done, each one :func:`advance`."""
    tracker.enter(step, detail, total, unit)


def count(part: str, total: int, unit: str = "") -> None:
    """A counted part of the current step starts (``rebuilding 12 runs``)."""
    tracker.count(part, total, unit)


def advance(n: int = 1) -> None:
    tracker.advance(n)


def describe() -> str:
    """``step 4 of 7, drawing the figures: 3 of 10 figures done, about 40 s left (1m02s in this step)``; empty
    before the first step."""
    return tracker.describe()


def reset() -> None:
    tracker.finish()


class StagePhases:
    """The current step's counted parts, for code that reports :class:`distrepro.orchestration.progress.Phases`
    (the hardware check, reading the runs): each phase becomes a counted part of the step."""

    def phase(self, name: str, total: int) -> None:
        count(name, total)

    def advance(self, n: int = 1) -> None:
        advance(n)

    def close(self) -> None:
        pass


@contextlib.contextmanager
def watch(
    label: str,
    announce: bool = True,
    stream: Any = None,
    every_s: float | None = None,
    clock: Callable[[], float] | None = None,
) -> Iterator[Steps]:
    """While the block runs, a heartbeat repeats the report's step with its count and estimate every ``every_s``
    seconds (:data:`~distrepro.orchestration.heartbeat.HEARTBEAT_S`), and with ``announce`` each step also prints a
    line as it starts (``[report for chao 0:01:12] step 4 of 7, drawing the figures: 10 figures``): the
    reproduction's report stage. ``distrepro report`` has the heartbeat only, so that a refused input (an unknown
    paper or baseline, found while reading or judging) stays the one line it prints. ``stream``: stderr by default;
    ``clock``: for tests."""
    global tracker
    previous = tracker
    tracker = Steps(label, STEPS, announce=announce, stream=stream, clock=clock or time.monotonic)
    try:
        with watched(tracker, True, every_s):
            yield tracker
    finally:
        tracker = previous
        tracker.finish()  # nothing is on once the block is over
