"""The report stage's own CPU inside a `distrepro reproduce` session, beside the session's whole CPU.

    cd <a fresh folder> && MLFLOW_TRACKING_URI=sqlite:///$PWD/mlflow.db \
        /usr/bin/time python <checkout>/benchmarks/report_stage_cpu.py PAPER

Runs ``distrepro reproduce PAPER --no-progress`` in this process with the report stage
(``distrepro.reproduction.reproduce.report_reproduction``) wrapped in ``time.process_time``, and prints
``REPORT-STAGE cpu_s=… wall_s=…`` on stderr. Why this way: the report runs in the session's main process and the
training cells in pool children, so this process's CPU over that call is the stage's, with the imports the session
already paid, as a user's session pays them (a standalone ``distrepro report`` pays them again); the whole session's
CPU, cells included, is what ``/usr/bin/time`` says. The share is the first over the second (the goal: ≤ 10 %).

This process is set up as the ``distrepro`` command's watched child is (``distrepro.cli.watch._CHILD``, with the
watcher's ``OMP_WAIT_POLICY``): the command's garbage-collector thresholds (``distrepro.cli.collector``), torch's
threads waiting asleep (``distrepro.cli.omp_wait``) and the quick exit (``distrepro.cli.console.exit_now``). Calling
``main()`` on CPython's default thresholds instead measured a process no user runs: about 0.7 s more CPU in C-ADP's
report stage, its full collections walking the session's ~600,000 long-lived objects. What is left out is the
watcher's own CPU (it parses the command line and waits, importing no torch), so the share is, if anything, high.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any


def timed(real: Callable[..., Any]) -> Callable[..., Any]:
    """``real`` that prints its own CPU and wall time on stderr when it returns or raises."""

    def call(*args: Any, **kwargs: Any) -> Any:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
            print(f"REPORT-STAGE cpu_s={cpu:.2f} wall_s={wall:.2f}", file=sys.stderr)

    return call


if __name__ == "__main__":  # the cells' spawned processes import this file again: they must not run a session
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        sys.exit(__doc__)
    from distrepro.cli.collector import collect_less
    from distrepro.cli.omp_wait import wait_passively

    wait_passively()  # before torch loads, as the watcher does for the child it starts
    collect_less()
    import distrepro.reproduction.reproduce as reproduce_module
    from distrepro.cli import main
    from distrepro.cli.console import exit_now

    reproduce_module.report_reproduction = timed(reproduce_module.report_reproduction)
    exit_now(main(["reproduce", sys.argv[1], "--no-progress"]))
