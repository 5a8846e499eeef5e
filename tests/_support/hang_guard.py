"""Hang guards that stretch with the machine's load, so that a busy machine slows the suite without failing it.

Why: a test's timeout (pytest-timeout's per-test limit, a subprocess's ``timeout=``, a thread's ``join``) exists
to end a test that hangs, not to bound how long a correct run may take. On a shared machine at load average L
with C cores, each runnable process gets about C/L of a core, so a correct run takes up to L/C times as long as
on an idle machine; a guard sized for an idle machine then fails tests that are merely slow (a fresh clone's
``nox -s tests`` at load 20-150 failed three tests that way). Every guard in the suite is therefore the idle-machine
guard times :func:`load_factor`, read when the guard starts: ``max(1, L/C)`` from the one-minute load average,
capped at :data:`MAX_FACTOR` so that a real hang still ends.

Nothing here asserts a duration: tests that check how much work a command did measure its CPU time
(``clirun.Done.cpu_s``), which a neighbour's load does not change.
"""

from __future__ import annotations

import os

#: the most a guard stretches: a hang still ends within MAX_FACTOR x its idle-machine guard
MAX_FACTOR = 25.0


def load_factor() -> float:
    """How many times slower than on an idle machine a CPU-bound process runs here now (at least 1)."""
    try:
        load_1min = os.getloadavg()[0]
    except OSError:  # no load average on this platform: the idle-machine guard
        return 1.0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return min(MAX_FACTOR, max(1.0, load_1min / max(1, cores)))


def hang_guard(seconds: float) -> float:
    """The guard for a step that takes well under ``seconds`` on an idle machine, stretched by the load now."""
    return seconds * load_factor()
