"""The ``distrepro`` console script and ``python -m distrepro.cli``: :func:`distrepro.cli.main.main`, then an end
without the interpreter's tear-down.

A one-step ``distrepro run`` spent about 1.7 s of its 6 s of CPU after its last exit handler had run: the
interpreter finalising the modules of torch, MLflow, SQLAlchemy and pandas one object at a time, work whose result
nobody sees. So once the command has returned, this runs what a normal exit runs that matters (every ``atexit``
handler: multiprocessing joining its children, MLflow's, ``logging.shutdown``, temporary folders' clean-up), flushes
stdout and stderr, and ends the process with :func:`os._exit`. Python does no more than this before finalising
(``Py_FinalizeEx``: threads joined, exit handlers, standard streams flushed), and every MLflow write of a command is
committed before it returns (runs are closed by their context managers).

Only here, never in :func:`~distrepro.cli.main.main` or a library call: tests and users' scripts call ``main()``
in-process, and their interpreter must go on. Where another thread is still alive (a plugin's, a pool's), or a
profiler, tracer or debugger watches the process (it writes its results at the normal exit), the exit is the normal
one.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn

#: the exit status Python itself gives when flushing the standard streams fails at exit (``Py_RunMain``)
FLUSH_FAILED = 120


def console() -> NoReturn:
    """The ``distrepro`` command: run it, with fewer garbage collections (:mod:`distrepro.cli.collector`) and
    torch's threads waiting asleep (:mod:`distrepro.cli.omp_wait`), then end at once (see the module docstring)."""
    from distrepro.cli.collector import collect_less
    from distrepro.cli.omp_wait import wait_passively

    collect_less()
    wait_passively()
    from distrepro.cli.main import main

    exit_now(main())


def exit_now(code: int) -> NoReturn:
    """End the process with ``code`` after the exit handlers and a flush of stdout and stderr, skipping the
    interpreter's finalisation; the normal exit (``sys.exit``) where another thread is alive or this Python has
    no handlers to run by hand."""
    run_handlers = getattr(atexit, "_run_exitfuncs", None)
    if run_handlers is None or _other_threads() or _observed():
        sys.exit(code)
    run_handlers()  # exceptions in a handler are printed and skipped, as at a normal exit
    if _other_threads():  # a handler started one: let the normal exit wait for it
        sys.exit(code)
    os._exit(code if _flushed() else FLUSH_FAILED)


def _observed() -> bool:
    """Whether a profiler, tracer or debugger watches this process (``python -m cProfile -m distrepro.cli``,
    ``coverage run``, pdb): it writes its results after the command returns, so the exit is the normal one."""
    if sys.gettrace() is not None or sys.getprofile() is not None:
        return True
    monitoring = getattr(sys, "monitoring", None)  # Python 3.12+: coverage's and debuggers' newer hooks
    return monitoring is not None and any(monitoring.get_tool(i) is not None for i in range(6))


def _other_threads() -> bool:
    """Whether a thread other than this one is alive that a normal exit would wait for (not a daemon)."""
    me = threading.current_thread()
    return any(t is not me and not t.daemon and t.is_alive() for t in threading.enumerate())


def _flushed() -> bool:
    """Flush stdout and stderr (and the originals, if replaced); False where the output could not be written."""
    ok = True
    seen: set[int] = set()
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        if stream is None or id(stream) in seen or getattr(stream, "closed", False):
            continue  # a closed stream has nothing to flush (Python's own exit skips it too)
        seen.add(id(stream))
        try:
            stream.flush()
        except BrokenPipeError:
            pass  # ``distrepro list | head``: the reader has what it wanted and left (as main() treats it)
        except (OSError, ValueError):  # a full disk under a redirected stream: the output is incomplete
            ok = False
    return ok
