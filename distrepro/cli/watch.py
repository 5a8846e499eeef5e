"""``run`` and ``reproduce`` train in a child process that the command watches, so that a process that vanishes is
still reported.

Why: in the in-process engine (``--jobs 1``) a plugin's ``train_step`` runs in the command's own process. One that
calls ``os._exit(0)`` skips every ``finally``, exit hook and ``atexit``: the command exited 0 with no output and left
its campaign RUNNING. No code in that process can notice its own end, so another process must. The pool already
does this for its workers (:mod:`distrepro.orchestration.executors.local_pool`); here the command line does it for
the process that holds the campaign.

Why this design and not "the next command marks the dead runs": that would still have exited 0 with nothing said,
and a script (or a user) would take the campaign for done. Watching costs one small interpreter (stdlib and the
parser; about 0.1 s of CPU) that waits; the child runs the very same ``main`` as before, so results are unchanged.
The campaign's lock (:mod:`distrepro.tracking.campaign_lock`) covers what no watcher can: a process whose watcher
died with it (``kill -9`` of the whole group) is found dead by the next ``--resume``, which takes its lock over.

How: the child notes the campaign runs it opens and closes and the status its ``main`` returns
(:mod:`distrepro.tracking.open_runs`). When it ends without that status (``os._exit``, a kill by the kernel, a
crash), the watcher marks the runs it left open FAILED with the reason (:mod:`distrepro.orchestration.abandoned`),
prints one line saying so and how to continue, and exits non-zero. Signals: Ctrl-C (SIGINT) and SIGQUIT reach the
child from the terminal (the same process group), so the watcher ignores them; SIGTERM and SIGHUP, which a scheduler
or ``kill`` sends to the command's process, are passed on to the child. The child dies with its watcher
(``PR_SET_PDEATHSIG``), as the single process did: ``kill -9`` of the command still ends the work.

Only where it is safe: on Linux (the death signal), for the command line itself (``main()`` called from Python, as
the tests do, runs in the caller's process), and not inside a watched child.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from distrepro.tracking.open_runs import OpenRun

#: commands whose process holds campaign runs while it trains
WATCHED_COMMANDS = ("run", "reproduce")
#: set in the child: the watcher's pid (the child checks it is still its parent once its death signal is set)
WATCHER_ENV = "DISTREPRO_WATCHER_PID"
#: ``DISTREPRO_WATCH=0`` runs the command in one process (a debugger attached to it, say)
SWITCH_ENV = "DISTREPRO_WATCH"
_PR_SET_PDEATHSIG = 1
#: the child: the watcher's own first path entry in place of ``-c``'s (so ``distrepro`` and every module come from
#: where the watcher's came from, the working folder's never shadowing them), then the same command line, ended as the
#: console script ends (:func:`distrepro.cli.console.exit_now`: exit handlers and a flush, then no interpreter
#: tear-down, the 1.7 s of CPU a one-step run spent finalising modules nobody uses again), its garbage collector
#: set as the console script sets it (:mod:`distrepro.cli.collector`)
_CHILD = (
    "import sys; sys.path[0] = sys.argv.pop(1); from distrepro.cli.collector import collect_less; collect_less(); "
    "from distrepro.cli.main import main; from distrepro.cli.console import exit_now; exit_now(main(sys.argv[1:]))"
)


def wants_watch(command: str | None) -> bool:
    """Whether the command line's ``command`` runs in a watched child."""
    return (
        command in WATCHED_COMMANDS
        and sys.platform.startswith("linux")
        and WATCHER_ENV not in os.environ
        and os.environ.get(SWITCH_ENV, "1") != "0"
    )


def run_watched(argv: list[str]) -> int:
    """Run ``distrepro *argv`` in a child process, wait for it, and return its exit status; one that ended without
    finishing has its open runs marked FAILED and a line on stderr."""
    from distrepro.tracking.open_runs import NOTES_ENV, read_notes

    fd, name = tempfile.mkstemp(prefix="distrepro-open-runs-", suffix=".jsonl")
    os.close(fd)
    notes = Path(name)
    first = sys.path[0] if sys.path else ""  # the script's folder (console script), the working folder (-m)
    env = {**os.environ, NOTES_ENV: name, WATCHER_ENV: str(os.getpid())}
    # -X, -W: the child runs as this interpreter was asked to (multiprocessing's spawn passes them the same way)
    flags: list[str] = subprocess._args_from_interpreter_flags()  # type: ignore[attr-defined]
    passed: list[int] = []
    try:
        child = subprocess.Popen([sys.executable, *flags, "-c", _CHILD, first, *argv], env=env)
        with _signals_to(child, passed):
            code = child.wait()
        found = read_notes(notes)
    finally:
        notes.unlink(missing_ok=True)
    status = code if code >= 0 else 128 - code
    if found.exit is not None:
        return status
    if code < 0 and -code in (*passed, signal.SIGINT) and not found.open:  # stopped before any run opened
        return status
    return _ended_unfinished(argv, child.pid, code, found.open)


@contextlib.contextmanager
def _signals_to(child: subprocess.Popen[bytes], passed: list[int]) -> Iterator[None]:
    """Within the block SIGINT and SIGQUIT are ignored here (the terminal sends them to the child too) and SIGTERM and
    SIGHUP are passed on to ``child``; ``passed`` collects the signals passed on."""

    def pass_on(signum: int, frame: FrameType | None) -> None:
        passed.append(signum)
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)

    before: dict[int, Any] = {}
    for ignored in (signal.SIGINT, signal.SIGQUIT):
        before[ignored] = signal.signal(ignored, signal.SIG_IGN)
    for passed_on in (signal.SIGTERM, signal.SIGHUP):
        before[passed_on] = signal.signal(passed_on, pass_on)
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _how(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "a real-time signal"
        cause = "; out of memory?" if -code == signal.SIGKILL else ""
        return f"killed by signal {-code} ({name}{cause})"
    if code == 0:
        return "exit code 0 without Python's exit: os._exit in a plugin?"
    return f"exit code {code} without Python's exit: a native library (torch, MKL) or os._exit ended it; see above"


def _ended_unfinished(argv: list[str], pid: int, code: int, runs: list[OpenRun]) -> int:
    """Mark the runs the child left open FAILED; one line: what ended how, which runs, how to continue. Returns the
    exit status: the child's if it was an error's, else 1."""
    from distrepro.orchestration.interrupts import continue_with

    how = _how(code)
    line = f"distrepro: error: the command's process {pid} ended without finishing ({how})"
    if runs:
        from distrepro.orchestration.abandoned import fail_abandoned

        reason = f"worker exited without finishing: process {pid} ended ({how})"
        marked: list[str] = []
        try:
            for run in runs:
                marked += fail_abandoned(run.uri, run.run_id, run.pid, reason)
        except Exception as exc:  # the store itself may be what went: say so, and what stays RUNNING
            line += f"; its runs could not be marked FAILED ({type(exc).__name__}: {exc}), a --resume takes them over"
        else:
            named = ", ".join(f"{run.kind} {run.run_id}" for run in runs)
            seeds = f" and the unfinished seed run(s) {', '.join(marked)}" if marked else ""
            line += f": {named}{seeds} marked FAILED"
        line += f"; {continue_with(argv, runs[0].run_id)}"
    print(line, file=sys.stderr, flush=True)
    return code if code > 0 else 128 - code if code < 0 else 1


def child_start() -> None:
    """In a watched child: die with the watcher (``kill -9`` of the command ends the work, as before); if the watcher
    is already gone, end now."""
    watcher = os.environ.pop(WATCHER_ENV, None)  # not inherited: a worker this child starts is no watched child
    if not watcher:
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if str(os.getppid()) != watcher:  # it died before the death signal was set
        os._exit(128 + signal.SIGKILL)
