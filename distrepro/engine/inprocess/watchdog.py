"""A watchdog for the in-process engine: a cell whose method makes no progress for ``dist.timeout_s`` fails.

The distributed engine bounds every collective by ``dist.timeout_s``; the in-process engine runs every worker
in this one thread, so a ``train_step`` that blocks (a lock never released, a queue never filled, an endless
loop) would hang the cell for ever, silently. The watchdog arms a real-time timer (``SIGALRM``) that every step
of every worker re-arms; when it fires, the blocked call is interrupted and the cell fails with
:class:`NoProgress`, naming the timeout. Evaluation, which is untimed and may take long on real data, pauses it.

A method cannot swallow it. A ``train_step`` that catches ``Exception`` around its wait (``except Exception:
pass``, then waits again) used to hang for ever after the one-shot timer: now, once fired, the watchdog keeps
firing every :data:`REPEAT_S` seconds until the harness has ended the cell, and every later firing raises
:class:`Stalled`, a ``BaseException`` that ``except Exception`` does not catch. A step that swallowed the first
and returned is not let on either: the next :meth:`Watchdog.beat` (the harness's, outside the method's frames)
raises :class:`Stalled` instead of re-arming, and the scheduler fails the rank with the watchdog's message.

A loaded machine is not a hang. On 2 cores shared with a dozen other processes a step that needs 20 s of CPU can
take minutes of wall time, and a plain wall-clock timer failed such cells (C-ADP's CPU workers at a load of 17). So
when the timer fires, the watchdog asks how much CPU this process used since the last step: a step still computing
(at least :data:`BUSY_SHARE` of the wall time, but under ``timeout_s`` of CPU) is only slow, and the timer is
re-armed; a blocked call (a lock, a queue: next to no CPU) fails at ``timeout_s`` of wall time as before, and an
endless loop once it has burnt ``timeout_s`` of CPU.

Signals reach only the main thread, so the watchdog is active only there (the CLI, a pool worker's cell); in
another thread, or where ``SIGALRM`` is already taken, it stands aside and says nothing.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from distrepro.errors import DistreproError

#: seconds between the watchdog's firings once it has fired (until the harness ends the cell)
REPEAT_S = 0.5
#: the share of wall time a step must spend on this process's CPU to count as computing, not blocked (2 cores
#: under a load of 40 still give a runnable process about 5 %; a blocked wait uses next to none)
BUSY_SHARE = 0.02


class NoProgress(DistreproError):
    """No worker of an in-process cell progressed for ``dist.timeout_s`` seconds of wall time."""


class Stalled(BaseException):
    """The watchdog firing again after a method swallowed :class:`NoProgress`: not an ``Exception``, so a method's
    ``except Exception`` lets it through to the scheduler, which fails the rank with its message."""


class Watchdog:
    """Re-armed by :meth:`beat`; :meth:`paused` for untimed work (evaluation)."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.active = False
        self.fired = False
        self._since = (time.monotonic(), time.process_time())  # wall and CPU clocks at the last beat

    @property
    def message(self) -> str:
        return (
            f"no worker made progress for {self.timeout_s:g} s (dist.timeout_s): a method's train_step blocks or "
            "loops without end; the cell is failed rather than left hanging"
        )

    def beat(self) -> None:
        if self.active:
            if self.fired:  # the method swallowed the watchdog's exception and went on: the cell ends here
                raise Stalled(self.message)
            self._since = (time.monotonic(), time.process_time())
            signal.setitimer(signal.ITIMER_REAL, self.timeout_s)

    def _still_computing(self) -> float | None:
        """Seconds until the next look when the step since the last beat is computing slowly (a loaded machine),
        else None (blocked, or out of CPU budget: no progress)."""
        wall = time.monotonic() - self._since[0]
        cpu = time.process_time() - self._since[1]
        if cpu < self.timeout_s and cpu >= BUSY_SHARE * wall:
            return max(REPEAT_S, self.timeout_s - cpu)
        return None

    @contextmanager
    def paused(self) -> Iterator[None]:
        if not self.active:
            yield
            return
        signal.setitimer(signal.ITIMER_REAL, 0)
        try:
            yield
        finally:
            self.beat()

    def _fire(self, signum: int, frame: FrameType | None) -> None:
        if not self.active:
            return
        if not self.fired:
            again = self._still_computing()
            if again is not None:  # slow, not stuck: look again later
                signal.setitimer(signal.ITIMER_REAL, again)
                return
        signal.setitimer(signal.ITIMER_REAL, min(REPEAT_S, self.timeout_s))  # again, until the cell has ended
        if self.fired:
            raise Stalled(self.message)
        self.fired = True
        raise NoProgress(self.message)

    @contextmanager
    def armed(self) -> Iterator[Watchdog]:
        usable = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
        previous: Any = signal.getsignal(signal.SIGALRM) if usable else None
        if not usable or previous not in (signal.SIG_DFL, signal.SIG_IGN, None):
            yield self  # another owner of SIGALRM, or not the main thread: stand aside
            return
        signal.signal(signal.SIGALRM, self._fire)
        self.active, self.fired = True, False
        try:
            self.beat()
            yield self
        except Stalled as exc:  # fired between the scheduler's handlers: still this cell's failure, as an error
            raise NoProgress(str(exc)) from None
        finally:
            self.active = False
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            self.fired = False
