"""Waiting for a benchmark's rank processes, within one deadline, and killing what is left of them.

Not a script. ``dist_overhead.py`` and ``shaped_links.py`` (its collectives and its training runs) each start one
process per rank in a session of its own; a rank that hangs must not hang the benchmark, and a rank left behind
must not outlive it with its children. Written once here, so that all three wait and clean up alike.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time


def wait_ranks(procs: list[subprocess.Popen[bytes]], timeout_s: float, what: str) -> None:
    """Wait for every rank, all within ``timeout_s`` (each gets at least a second); a rank that exits non-zero is a
    ``RuntimeError`` naming ``what``, the rank and its status, a rank still running at the deadline
    ``TimeoutExpired``."""
    deadline = time.monotonic() + timeout_s
    for rank, proc in enumerate(procs):
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        if code != 0:
            raise RuntimeError(f"{what}, rank {rank}, exited with status {code}")


def kill_left(procs: list[subprocess.Popen[bytes]]) -> None:
    """Kill the ranks still running: only the processes started here, each by its own session id (the rank's
    children with it)."""
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
