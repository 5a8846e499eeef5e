"""``--executor local``: cells in this process (``--jobs 1``) or in a pool of worker processes (``--jobs N``).

Why not :class:`concurrent.futures.ProcessPoolExecutor`: when one of its workers dies (killed, out of
memory), it fails every pending future and stops the other workers, so one dead cell would take the
campaign with it. Here each worker is a process with its own pipe: a worker that dies costs only the cell it
was running (reported FAILED with its exit signal), and a new worker takes its place. Workers live for the whole
campaign, so the datasets are built once per worker, not once per cell; they are started (:meth:`LocalExecutor.
start`) before the campaign builds its jobs and creates its runs, so their start overlaps that work.

Workers are forked from multiprocessing's fork server, which imports torch, MLflow and the campaign code
(:data:`PRELOAD`) once per campaign process: a ``spawn`` worker spent about 3 s of CPU on those imports, every
worker and every replacement. The fork server is a fresh interpreter (no fork of a process holding torch threads
and an MLflow client), started with this process's environment; a worker gets the environment of the moment it
is started (:func:`_serve` sets it, as ``spawn`` would have passed it), its working folder and ``sys.path`` as a
``spawn`` worker does, and reads its threads at run time (``OMP_NUM_THREADS``, set before any cell runs).

Ctrl-C is the campaign's process's to handle: workers start with SIGINT ignored (set around their start,
so that even their start-up, before any code of ours runs, cannot print a ``KeyboardInterrupt`` traceback),
and the campaign's process, on Ctrl-C or SIGTERM, terminates the busy ones: each marks its run KILLED on the
first SIGTERM, ignores any later one and exits quietly (a second signal arriving in the interpreter's exit
hooks printed an ``atexit`` traceback). A worker sends its outcome back without the trained models
(:func:`~distrepro.orchestration.executors.cell_task.without_models`): sent through the pipe, torch would
share each model's storage by passing file descriptors through multiprocessing's ``resource_sharer``, whose
server thread printed a ``ConnectionResetError`` traceback when Ctrl-C ended either side during the
hand-over. Any worker still alive after a grace period is killed, so no
process is left behind.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Iterator
from multiprocessing.connection import Connection, wait
from typing import Any

from distrepro.orchestration.executors.cell_task import CellOutcome, CellTask, failed, run_cell_task, without_models
from distrepro.orchestration.executors.interface import Events
from distrepro.orchestration.interrupts import termination_as_interrupt

#: imported once by the fork server the workers are forked from: what every cell needs (torch and MLflow with it)
PRELOAD = ("distrepro.orchestration.campaign", "distrepro.tracking.mlflow_client")
#: seconds a worker gets to close its run after Ctrl-C or SIGTERM before it is killed
GRACE_S = 10.0


def _context() -> Any:
    """multiprocessing's fork server, importing :data:`PRELOAD` once before it forks the first worker (``spawn``
    where there is none: Windows)."""
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(list(PRELOAD))
    return ctx


def _serve(conn: Connection, threads: int, env: dict[str, str]) -> None:
    """A worker: run the tasks sent down ``conn`` until told to stop (``None``); ``env``: the campaign process's
    environment when the worker was started (the fork server's is that of its own start)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the fork server may have been started outside _sigint_ignored
    os.environ.clear()
    os.environ.update(env)
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))  # read as each cell sets its threads
    # terminate() closes the run as Ctrl-C does: the first SIGTERM raises (sent again if Python drops it in a
    # weakref callback), later ones are ignored so the cleanup and the exit hooks finish in peace; SIG_IGN is
    # what the block puts back on its way out
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        with (
            contextlib.suppress(KeyboardInterrupt, EOFError, BrokenPipeError),
            termination_as_interrupt((signal.SIGTERM,)),
        ):
            _preload()
            while True:
                task = conn.recv()
                if task is None:
                    return
                conn.send(("running", task.key))
                conn.send(("done", without_models(run_cell_task(task))))
    finally:  # leaving: a signal now could only interrupt the exit hooks (with a traceback)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _preload() -> None:
    """Import what every cell needs (the fork server has, unless its import failed there)."""
    import distrepro.orchestration.campaign
    import distrepro.tracking.mlflow_client  # noqa: F401


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """SIGINT ignored in this process for the moment a worker is started (a no-op outside the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class _Worker:
    def __init__(self, ctx: Any, threads: int) -> None:
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(
            target=_serve, args=(child, threads, dict(os.environ)), daemon=True, name="distrepro-cell"
        )
        with _sigint_ignored():  # inherited by a fork server started now, which then installs no Ctrl-C handler
            self.proc.start()
        child.close()
        self.task: CellTask | None = None

    def death(self) -> str:
        """Why the cell this worker ran has no outcome: a signal killed it, or it exited without finishing
        (``os._exit(0)`` in a method: the cell's run is FAILED however the process ended)."""
        code = self.proc.exitcode
        if code is not None and code < 0:
            return f"its worker process {self.proc.pid} died (signal {-code}) while running it"
        return f"its worker process {self.proc.pid}: worker exited without finishing (exit code {code})"


class LocalExecutor:
    """``jobs`` cells at a time on this machine; ``jobs == 1`` runs them in this process, one by one."""

    name = "local"
    remote = False

    def __init__(self, jobs: int, threads: int) -> None:
        self.jobs = max(1, jobs)
        self.threads = max(1, threads)  # torch threads per cell when its config sets none
        self._workers: list[_Worker] = []

    def start(self) -> None:
        """Start the worker processes now (the fork server imports torch and mlflow while the campaign prepares)."""
        if self.jobs > 1 and not self._workers:
            ctx = _context()
            self._workers = [_Worker(ctx, self.threads) for _ in range(self.jobs)]

    def close(self) -> None:
        """Stop the workers (idle ones at once; busy ones are interrupted, then killed), then the fork server."""
        workers, self._workers = self._workers, []
        _stop(workers)
        if workers:
            _stop_fork_server()

    def describe(self) -> str:
        return f"local, {self.jobs} job(s)"

    def run(self, tasks: list[CellTask], events: Events) -> list[CellOutcome]:
        if self.jobs == 1:
            return self._inline(tasks, events)
        return self._pool(tasks, events)

    def _inline(self, tasks: list[CellTask], events: Events) -> list[CellOutcome]:
        outcomes = []
        for task in tasks:
            events("running", task, None)
            outcome = run_cell_task(task)
            events("done", task, outcome)
            outcomes.append(outcome)
        return outcomes

    def _pool(self, tasks: list[CellTask], events: Events) -> list[CellOutcome]:
        ctx = _context()  # a worker that died is replaced from the same fork server
        queue = deque(tasks)
        outcomes: list[CellOutcome] = []
        self.start()
        try:
            while queue or any(w.task is not None for w in self._workers):
                # a worker that died (its cell reported FAILED) is replaced while cells are left
                self._workers = [w for w in self._workers if w.proc.is_alive() or w.task is not None]
                while queue and len(self._workers) < self.jobs:
                    self._workers.append(_Worker(ctx, self.threads))
                for w in self._workers:  # idle workers take the next cells
                    if w.task is None and queue:
                        w.task = queue.popleft()
                        w.conn.send(w.task)
                busy = [w for w in self._workers if w.task is not None]
                wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], timeout=5.0)
                for w in busy:
                    self._collect(w, events, outcomes)
        finally:
            self.close()
        return outcomes

    @staticmethod
    def _collect(w: _Worker, events: Events, outcomes: list[CellOutcome]) -> None:
        task = w.task
        assert task is not None
        try:
            while w.conn.poll():
                kind, payload = w.conn.recv()
                if kind == "running":
                    events("running", task, None)
                else:
                    outcomes.append(payload)
                    events("done", task, payload)
                    w.task = None
                    return
        except (EOFError, OSError):
            pass
        if not w.proc.is_alive():
            w.proc.join()
            outcome = failed(task, w.death())
            outcomes.append(outcome)
            events("done", task, outcome)
            w.task = None


def _stop_fork_server() -> None:
    """End the fork server and wait for it, once its workers have ended. Its workers are its children, not this
    process's: only a fork server this process waits for brings its CPU time and theirs into this process's
    children's (``wait4``, what ``/usr/bin/time`` and the suite's benchmarks count). Left running, it would also
    outlive the pool until this process exits. multiprocessing starts a new one for the next pool.
    ``ForkServer._stop`` is CPython's own (3.8 on), used by its tests; without it the server ends with this process
    as before."""
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    stop = getattr(server, "_stop", None)
    if stop is not None and getattr(server, "_forkserver_pid", None) is not None:
        with contextlib.suppress(OSError):
            stop()


def _stop(workers: list[_Worker]) -> None:
    """Tell idle workers to stop; interrupt busy ones (their run is marked KILLED); kill what remains."""
    for w in workers:
        with contextlib.suppress(OSError, ValueError):
            if w.task is None:
                w.conn.send(None)
            elif w.proc.is_alive():
                w.proc.terminate()
    deadline = time.monotonic() + GRACE_S
    for w in workers:
        w.proc.join(max(0.0, deadline - time.monotonic()))
        if w.proc.is_alive():
            w.proc.kill()
            w.proc.join()
        w.conn.close()
