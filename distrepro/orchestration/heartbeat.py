"""Say what a long command is doing: the step it is on, how far into it, about how long the rest takes.

A step of minutes that prints nothing reads as a hang (``reproduce chao``'s report stage once printed 19
``[alive] report for chao`` lines over 8.5 minutes and nothing else). :class:`Steps` holds the step a command is on,
with a count where one is known (``judging: 12 of 48 claims done``) and, once a unit is done, the time the rest
should take at the pace so far; :func:`heartbeat` prints it every :data:`HEARTBEAT_S` seconds, so no step is silent
for longer without naming itself. A step may also print a line when it starts (``announce``).

This module imports nothing but the standard library, so a command can print its first line and start its
heartbeat before it imports torch and MLflow (seconds on an idle machine, tens of seconds on a loaded one).
One object is replaced at once on every change, so the heartbeat's thread reads a consistent state without a lock.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

#: seconds between two heartbeat lines: a CI job, a SLURM log or a terminal sees what the command is doing
HEARTBEAT_S = 25.0

_last_line = time.monotonic()  # when this module last printed (a heartbeat, an announced step), or was imported


def _said() -> None:
    global _last_line
    _last_line = time.monotonic()


def _print_line(text: str, stream: Any) -> None:
    """``text`` and its newline in one ``write``: ``print`` writes them in two, and a line another thread writes
    in between (the heartbeat's thread beside the command's) would end up inside this one, with an empty line
    after it; then a reader of the log, or a test's filter of heartbeat lines, sees a line that is neither."""
    if stream is None:  # no stderr at all (a windowless interpreter): nowhere to say it
        return
    stream.write(text + "\n")
    stream.flush()


def clock_text(seconds: float) -> str:
    """``1m02s``: time spent, as the heartbeat lines print it."""
    s = int(seconds)
    return f"{s // 60}m{s % 60:02d}s"


def about(seconds: float) -> str:
    """``about 40 s``, ``about 3 min``, ``about 1 h 05 min``: a duration said as the estimate it is (rounded to
    5 s, then to the minute)."""
    if seconds < 90:
        return f"about {max(5, 5 * round(seconds / 5))} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"about {minutes} min"
    return f"about {minutes // 60} h {minutes % 60:02d} min"


def plural(n: int, noun: str) -> str:
    """``1 figure``, ``3 figures``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


@contextlib.contextmanager
def heartbeat(
    status: Callable[[], str],
    enabled: bool,
    every_s: float | None = None,
    stream: Any = None,
    since: float | None = None,
) -> Iterator[None]:
    """While the block runs, print ``[alive <elapsed>] <status()>`` every ``every_s`` seconds (default
    :data:`HEARTBEAT_S`, read when the block starts, so a test can shorten it) when ``enabled``,
    from a daemon thread, so a long evaluation, data load or report shows what it is doing between its other
    lines; an empty ``status()`` prints nothing (the step shows itself another way). ``stream``: stderr by default,
    looked up at each line so a live bar that redirects stderr keeps its place. Stops, and joins the thread, when
    the block ends however it ends. ``since``: when the silence the first line ends began (default: now)."""
    if not enabled:
        yield
        return
    stop = threading.Event()
    start = time.monotonic()
    period = HEARTBEAT_S if every_s is None else every_s
    first = max(0.0, (start if since is None else since) + period - start)

    def beat() -> None:
        wait = first
        while not stop.wait(wait):
            wait = period
            try:
                text = status()
                if text:
                    out = stream or sys.stderr
                    _print_line(f"[alive {clock_text(time.monotonic() - start)}] {text}", out)
                    _said()
            except Exception:  # a closed stream must not kill the run
                return

    thread = threading.Thread(target=beat, name="distrepro-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


@dataclass(frozen=True)
class _Now:
    step: str = ""
    detail: str = ""
    part: str = ""  # a counted part of the step (``rebuilding 12 runs``), when the step has several
    unit: str = ""  # what is counted (``figure``), for the count's words
    total: int = 0
    done: int = 0
    since: float = 0.0  # the step's start
    counting_since: float = 0.0  # when the counted units began: the pace the estimate reads


class Steps:
    """The step a command is on, for its heartbeat (:meth:`status`) and, with ``announce``, a line as each step
    (or counted part of one) starts. ``steps``: the command's steps in order, numbered ``step 3 of 7`` when one of
    them is entered (a step not in the list is named without a number). ``clock``: seconds, monotonic (tests pass
    their own)."""

    def __init__(
        self,
        label: str = "",
        steps: Sequence[str] = (),
        announce: bool = False,
        stream: Any = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label, self.steps, self.announce, self.stream, self.clock = label, tuple(steps), announce, stream, clock
        self.started = clock()
        self._now = _Now()

    def enter(self, step: str, detail: str = "", total: int = 0, unit: str = "") -> None:
        """Step ``step`` starts; ``detail`` says what it works on, ``total`` units of ``unit`` are to be done."""
        now = self.clock()
        self._now = _Now(step, detail, "", unit, max(total, 0), 0, now, now)
        self._say(self.headline())

    def count(self, part: str, total: int, unit: str = "") -> None:
        """A counted part of the current step starts (``rebuilding 12 runs``): ``total`` units, none done yet."""
        now = self.clock()
        since = self._now.since if self._now.step else now  # a count outside any step is a step of its own
        self._now = replace(
            self._now, part=part, unit=unit, total=max(total, 0), done=0, since=since, counting_since=now
        )
        self._say(f"{self.headline()}, {part}" if self._now.step else part)

    def advance(self, n: int = 1) -> None:
        """``n`` more units of the current count are done."""
        self._now = replace(self._now, done=self._now.done + n)

    def finish(self) -> None:
        """No step now: :meth:`status` is empty (the heartbeat prints nothing) until the next :meth:`enter`."""
        self._now = _Now()

    def headline(self, sized: bool = True) -> str:
        """``step 4 of 7, drawing the figures: 10 figures``: the step (its size unless not ``sized``), without
        progress or time."""
        now = self._now
        where = f"step {self.steps.index(now.step) + 1} of {len(self.steps)}, " if now.step in self.steps else ""
        what = f"{now.step}{' ' + now.detail if now.detail else ''}"
        size = f": {plural(now.total, now.unit)}" if sized and now.total and now.unit and not now.part else ""
        return f"{where}{what}{size}"

    def progress(self) -> str:
        """``12 of 32 settings done, about 40 s left``; empty without a count. The estimate comes once a unit is
        done: the time per unit so far times the units left."""
        now = self._now
        if not now.total:
            return ""
        unit = f" {now.unit}{'' if now.total == 1 else 's'}" if now.unit else ""
        text = f"{now.done} of {now.total}{unit} done"
        if 0 < now.done < now.total:
            per_unit = (self.clock() - now.counting_since) / now.done
            text += f", {about(per_unit * (now.total - now.done))} left"
        return text

    def describe(self) -> str:
        """``step 4 of 7, drawing the figures: 3 of 10 figures done, about 40 s left (0m31s in this step)``;
        empty when no step is on."""
        now = self._now
        if not now.step and not now.part:
            return ""
        text = self.headline(sized=False)
        text = f"{text}, {now.part}" if now.part and now.step else now.part or text
        counted = self.progress()
        spent = clock_text(self.clock() - now.since)
        return f"{text}{': ' + counted if counted else ''} ({spent} in this step)"

    def status(self) -> str:
        """``<label>: <describe()>`` for :func:`heartbeat`; empty when no step is on."""
        text = self.describe()
        return f"{self.label}: {text}" if text and self.label else text

    def _say(self, text: str) -> None:
        if self.announce and text:
            spent = int(self.clock() - self.started)
            stamp = f"{spent // 3600}:{spent // 60 % 60:02d}:{spent % 60:02d}"
            head = f"[{self.label} {stamp}]" if self.label else f"[{stamp}]"
            _print_line(f"{head} {text}", self.stream or sys.stderr)
            _said()


@contextlib.contextmanager
def watched(steps: Steps, enabled: bool = True, every_s: float | None = None) -> Iterator[Steps]:
    """A heartbeat that reads ``steps`` while the block runs; the steps are finished when it ends. A watch that
    follows another (the start-up's, then the report's) continues its silence: its first line comes a heartbeat
    after this module's last line, not after its own start, so two short steps back to back are not silent for
    twice the interval."""
    period = HEARTBEAT_S if every_s is None else every_s
    now = time.monotonic()
    since = _last_line if now - _last_line < period else now
    try:
        with heartbeat(steps.status, enabled, every_s, steps.stream, since):
            yield steps
    finally:
        steps.finish()
