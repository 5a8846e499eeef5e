"""``--executor ray``: one Ray task per cell, on an existing cluster (``--ray-address``) or a local one.

Ray schedules the tasks by the cores each cell asks for (``num_cpus``: its torch threads, or ranks ×
threads for the dist engine), so a cluster runs as many cells at once as it has room for. A task is
never retried (``max_retries=0``): a cell whose worker died restarts from scratch only under
``--resume``, in a new child run, so that no metric history mixes two attempts.

Without an address, a Ray instance is started for the command on this machine (about 4 s) and shut
down at the end, which stops its workers; a Ray session already started in this process (a notebook,
the tests) is used as it is and left running. Ctrl-C cancels every task still queued or running
(``ray.cancel(force=True)`` kills the worker process, and the campaign marks the run KILLED); a Ctrl-C while
``ray.init`` or ``ray.shutdown`` runs takes effect when it returns (cut in the middle, ``ray.init`` left a
half-made driver that crashed the interpreter at exit, after the resume hint, with a segmentation fault).
A task returns its outcome without the trained models: the campaign reads only the metrics, and a
ResNet-50 is 100 MB to ship back per cell.

Which cells are running (rather than queued) the cells say themselves, to a small actor the command
reads every second: asking the tracking store instead races its writers (a SQLite reader waits for them).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from distrepro.errors import DistreproError
from distrepro.orchestration.executors.cell_task import CellOutcome, CellTask, failed, run_cell_task, without_models
from distrepro.orchestration.executors.interface import Events
from distrepro.orchestration.interrupts import deferred_interrupts


class _Board:
    """The keys of the cells that have started since the command last asked (a Ray actor, no CPU)."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    def started(self, key: str) -> None:
        self.keys.append(key)

    def drain(self) -> list[str]:
        keys, self.keys = self.keys, []
        return keys


def _ray_cell(task: CellTask, board: Any) -> CellOutcome:
    """A Ray task's body: say the cell started, then run it; the outcome comes back without the trained models
    (:func:`~distrepro.orchestration.executors.cell_task.without_models`)."""
    board.started.remote(task.key)
    return without_models(run_cell_task(task))


class RayExecutor:
    name = "ray"

    def __init__(self, address: str | None = None) -> None:
        self.address = address
        self.remote = address is not None  # cells may run on other machines: they need a tracking server
        self.threads = 1  # torch threads (and Ray CPUs) of a cell whose config sets none

    def describe(self) -> str:
        return f"ray ({self.address or 'local instance'})"

    def run(self, tasks: list[CellTask], events: Events) -> list[CellOutcome]:
        try:
            import ray
        except ImportError:
            raise DistreproError("--executor ray needs Ray: pip install 'distrepro[ray]'") from None
        started = not ray.is_initialized()
        try:
            if started:
                # a Ray started here forks its workers from this environment; a cluster's workers get these
                env = {k: v for k, v in os.environ.items() if k.startswith(("MLFLOW_", "DISTREPRO_"))}
                with deferred_interrupts():  # cut in the middle, ray.init leaves a driver that crashes at exit
                    ray.init(
                        address=self.address,
                        include_dashboard=False,
                        runtime_env={"env_vars": env} if env and self.address else None,
                        _temp_dir=None if self.address else local_temp_dir(),
                    )
            return self._run(ray, tasks, events)
        finally:
            if started:
                with deferred_interrupts():  # so is ray.shutdown (a no-op when ray.init did not get far)
                    ray.shutdown()

    def _run(self, ray: Any, tasks: list[CellTask], events: Events) -> list[CellOutcome]:
        board = ray.remote(num_cpus=0)(_Board).remote()
        remote = ray.remote(max_retries=0)(_ray_cell)
        refs = {
            remote.options(num_cpus=t.cpus, name=f"distrepro {t.key}").remote(_with_executor(t, "ray"), board): t
            for t in tasks
        }
        by_key = {t.key: t for t in tasks}
        pending = dict(refs)
        outcomes: list[CellOutcome] = []
        try:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
                for ref in done:
                    task = pending.pop(ref)
                    outcome = _get(ray, ref, task)
                    outcomes.append(outcome)
                    events("done", task, outcome)
                for key in ray.get(board.drain.remote()) if pending else []:
                    if any(t.key == key for t in pending.values()):  # not already reported done
                        events("running", by_key[key], None)
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
        finally:
            with contextlib.suppress(Exception):
                ray.kill(board)
        return outcomes


def _with_executor(task: CellTask, name: str) -> CellTask:
    from dataclasses import replace

    return replace(task, executor=name)


def _get(ray: Any, ref: Any, task: CellTask) -> CellOutcome:
    """The task's outcome, or FAILED with what Ray says happened to its worker."""
    try:
        return ray.get(ref)  # type: ignore[no-any-return,unused-ignore]
    except ray.exceptions.RayError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return failed(task, f"Ray {type(exc).__name__}: {first}".rstrip(": "))


def local_temp_dir() -> str | None:
    """Where a Ray started here keeps its session: None (Ray's default) unless the temp folder lies inside the
    running virtualenv, which Ray refuses for its workers ("temp_dir must not be child directory of virtualenv
    root", ray/_private/parameter.py) and which is where nox points TMPDIR; then ``/tmp/ray-<uid>`` (short: Ray's
    Unix socket paths must stay under 108 characters). Without this the workers die at start and the driver
    waits for them."""
    temp = Path(tempfile.gettempdir()).resolve()
    venv = Path(sys.prefix).resolve()
    if sys.prefix != sys.base_prefix and temp.is_relative_to(venv):
        return f"/tmp/ray-{os.getuid()}"
    return None
