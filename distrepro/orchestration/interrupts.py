"""SIGTERM handled as Ctrl-C is: the runs are marked KILLED, the ranks ended, a resume hint printed.

Why: SIGTERM is what a SLURM time limit, ``timeout``, ``docker stop`` and ``kill`` send. Python's default
is to die at once, so no ``finally`` runs: the campaign and its child runs stay RUNNING in MLflow for
ever and the distributed engine's ranks, each in its own session, live on as orphans. Everything that
handles Ctrl-C already does the right thing for ``KeyboardInterrupt`` (the campaign closes its runs
KILLED, the launcher kills its ranks in a ``finally``), so within :func:`termination_as_interrupt` a
SIGTERM raises :class:`~distrepro.errors.Terminated`, a ``KeyboardInterrupt``, in the main thread, and
takes the same path.

Only the first signal raises: a second SIGTERM (schedulers repeat it; a user presses twice) arriving
while the runs are being closed would abort the very cleanup the first one started. SIGKILL, which
SLURM sends after its grace period, still ends the process. A first signal whose exception Python drops
(the handler ran inside a weakref callback or a ``__del__``) is sent again (:class:`_FirstSignalRaises`), and so is
a Ctrl-C whose ``KeyboardInterrupt`` Python's own handler raised there.

A small, reusable piece on purpose: an executor of campaign cells (a process pool) wraps its own main
loop in it, and a worker process can too.

:func:`deferred_interrupts` is the other half: a few calls must not be cut in the middle (Ray's ``ray.init``,
interrupted while it builds the driver's core worker, leaves a half-made one that crashes the interpreter at
exit with a segmentation fault, after the resume hint, so the exit status is -11 instead of 130). Within it
Ctrl-C and the termination signals are noted and take effect when the block ends.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from distrepro.errors import Terminated, killed_runs

#: the signals that mean "stop, cleanly": SIGTERM (SLURM, timeout, docker stop, kill) and SIGHUP (the
#: terminal or SSH session went away)
TERMINATION_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGHUP)

#: seconds before a dropped termination signal is sent again (long enough for the callback that dropped it to return)
RESEND_DELAY_S = 0.01


class _FirstSignalRaises:
    """The handler of :func:`termination_as_interrupt`, and its guard against Python dropping the exception.

    A signal handler runs in the main thread at the next check of the interpreter, which may fall inside a
    weakref callback or a ``__del__`` (the garbage collector runs them anywhere). Python prints an exception
    raised there ("Exception ignored in ...") and drops it, so the first signal would be lost and every later one
    ignored: CI saw a ``distrepro run`` outlive its SIGTERM by minutes. :meth:`dropped` (``sys.unraisablehook``)
    sees that happen and sends the signal again a moment later, from another thread, so that it arrives after the
    callback has returned, in the code the callback interrupted. Ctrl-C has the same weakness under Python's own
    handler (``signal.default_int_handler``): a dropped ``KeyboardInterrupt`` is sent again as SIGINT the same way,
    so one press is enough."""

    def __init__(self) -> None:
        self.fired = False
        self.in_hook = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.in_hook:  # raising here would be dropped as well: once more, later
            self.resend_later(signum)
            return
        if self.fired:
            return  # the first one is being handled: let its cleanup finish
        self.fired = True
        raise Terminated(signum)

    def dropped(self, unraisable: Any, previous_hook: Any) -> None:
        exc = unraisable.exc_value
        if type(exc) is KeyboardInterrupt and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self.resend_later(signal.SIGINT)  # Ctrl-C, dropped: its handler raises it again where it belongs
            return
        if not (self.fired and isinstance(exc, Terminated)):
            previous_hook(unraisable)
            return
        self.in_hook = True
        try:
            self.fired = False
            self.resend_later(unraisable.exc_value.signum)
        finally:
            self.in_hook = False

    @staticmethod
    def resend_later(signum: int) -> None:
        timer = threading.Timer(RESEND_DELAY_S, os.kill, (os.getpid(), signum))
        timer.daemon = True
        timer.start()


@contextmanager
def termination_as_interrupt(signals: tuple[signal.Signals, ...] = TERMINATION_SIGNALS) -> Iterator[None]:
    """Within the block, the first of ``signals`` raises :class:`Terminated` (a ``KeyboardInterrupt``) in
    the main thread; later ones are ignored until the block ends. Outside the main thread (where Python
    cannot install handlers) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handler = _FirstSignalRaises()
    previous_hook = sys.unraisablehook
    sys.unraisablehook = lambda unraisable: handler.dropped(unraisable, previous_hook)
    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        sys.unraisablehook = previous_hook


@contextmanager
def deferred_interrupts(signals: tuple[signal.Signals, ...] = (signal.SIGINT, *TERMINATION_SIGNALS)) -> Iterator[None]:
    """Within the block, ``signals`` are noted, not acted on; when it ends, the first one noted is handed to the
    handler that was in place before (Ctrl-C's ``KeyboardInterrupt``, :func:`termination_as_interrupt`'s
    :class:`Terminated`), unless an interrupt is already on its way out of the block. Later ones are dropped,
    as :func:`termination_as_interrupt` drops them. Outside the main thread it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        noted.append(signum)

    previous = {sig: signal.signal(sig, note) for sig in signals}
    interrupted = False
    try:
        yield
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        if noted and not interrupted:
            _deliver(noted[0], previous[signal.Signals(noted[0])])


def _deliver(signum: int, handler: Any) -> None:
    """Act on ``signum`` now, as the handler that was in place when it arrived would have."""
    if callable(handler):
        handler(signum, None)
    elif handler == signal.SIG_DFL:
        signal.raise_signal(signum)  # the default action: end the process (as the signal would have)


def exit_status(exc: KeyboardInterrupt) -> int:
    """The shell's status for a process ended by a signal: 128 + its number (130 for Ctrl-C, 143 for SIGTERM)."""
    signum = exc.signum if isinstance(exc, Terminated) else signal.SIGINT
    return 128 + int(signum)


def interrupted_line(exc: KeyboardInterrupt, argv: list[str]) -> str:
    """What the CLI prints for Ctrl-C or SIGTERM: the signal, the campaign runs it left KILLED and how to go
    on. For ``distrepro run`` that is the same command with ``--resume RUN_ID``; any other command's campaign
    (an arm of ``reproduce``) resumes the same way from the ``config.yaml`` logged on its run."""
    how = f"interrupted ({'Ctrl-C' if not isinstance(exc, Terminated) else exc.args[0]})"
    runs = killed_runs(exc)
    if not runs:
        return f"distrepro: {how}"
    run_id = runs[-1]  # closed last: the outermost run (``reproduce``'s umbrella run, closed after its arms)
    what = "reproduction run" if argv[:1] == ["reproduce"] else "campaign run"
    return f"distrepro: {how}; {what} {run_id} marked KILLED; {continue_with(argv, run_id)}"


def continue_with(argv: list[str], run_id: str) -> str:
    """How to go on with run ``run_id``, left unfinished by the command ``argv``: for ``distrepro run`` the same
    command with ``--resume RUN_ID``, for ``reproduce`` its resume; any other command's campaign (an arm of
    ``reproduce``) resumes the same way from the ``config.yaml`` logged on its run."""
    if argv[:1] == ["reproduce"]:
        again = _without_start_flags(_without_resume(argv))
        return f"continue it with: distrepro {shlex.join([*again, '--resume', run_id])}"
    if argv[:1] == ["run"]:
        return f"continue it with: distrepro {shlex.join([*_without_resume(argv), '--resume', run_id])}"
    logged = "CONFIG being the config.yaml logged on that run"
    return f"continue it with: distrepro run CONFIG --resume {run_id}, {logged}"


_RUN_ID = re.compile(r"[0-9a-f]{32}")


def _without_resume(argv: list[str]) -> list[str]:
    """``argv`` without its ``--resume RUN_ID`` (``reproduce``'s run id is optional: there only a run id is dropped)."""
    rest, skip = [], False
    for arg in argv:
        if skip and (argv[:1] == ["run"] or _RUN_ID.fullmatch(arg)):
            skip = False
            continue
        skip = False
        if arg.startswith("--resume="):
            continue
        if arg == "--resume":
            skip = True
            continue
        rest.append(arg)
    return rest


#: ``reproduce`` flags a resume replays from the reproduction's run and refuses on its command line
_START_FLAGS = ("--seeds", "--arms", "--with", "--set")


def _without_start_flags(argv: list[str]) -> list[str]:
    """``argv`` without ``--seeds``, ``--arms``, ``--with`` and ``--set`` (each with its value): ``reproduce
    --resume`` continues with the ones the reproduction started with and refuses them given again."""
    rest, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in _START_FLAGS:
            skip = True
            continue
        if arg.startswith(tuple(f"{flag}=" for flag in _START_FLAGS)):
            continue
        rest.append(arg)
    return rest
