"""``--executor ray``: one Ray task per cell, on an existing cluster (``--ray-address``) or a local one.

Ray schedules the tasks by the cores each cell asks for (``num_cpus``: its torch threads, or ranks ×
threads for the dist engine), so a cluster runs as many cells at once as it has room for. A task is
never retried (``max_retries=0``): a cell whose worker died restarts from scratch only under
``--resume``, in a new child run, so that no metric history mixes two attempts.

Without an address, a Ray instance is started for the command on this machine (about 4 s) and shut
down at the end, which stops its workers; a Ray session already started in this process (a notebook,
the tests) is used as it is and left running. Ctrl-C cancels every task still queued or running
(``ray.cancel(force=True)`` kills the worker process, and the campaign marks the run KILLED).

Which cells are running (rather than queued) is read from the tracking store, where each cell marks
its run RUNNING when it starts: one query every few seconds, however many cells.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from distrepro.errors import DistreproError
from distrepro.orchestration.executors.cell_task import CellOutcome, CellTask, failed, run_cell_task

Events = Callable[[str, CellTask, CellOutcome | None], None]

#: seconds between two reads of which runs have started
STATUS_EVERY_S = 5.0


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
        started = False
        if not ray.is_initialized():
            # a Ray started here forks its workers from this environment; a cluster's workers get these
            env = {k: v for k, v in os.environ.items() if k.startswith(("MLFLOW_", "DISTREPRO_"))}
            ray.init(
                address=self.address,
                include_dashboard=False,
                runtime_env={"env_vars": env} if env and self.address else None,
            )
            started = True
        try:
            return self._run(ray, tasks, events)
        finally:
            if started:
                ray.shutdown()

    def _run(self, ray: Any, tasks: list[CellTask], events: Events) -> list[CellOutcome]:
        remote = ray.remote(max_retries=0)(run_cell_task)
        refs = {
            remote.options(num_cpus=t.cpus, name=f"distrepro {t.key}").remote(_with_executor(t, "ray"), None): t
            for t in tasks
        }
        pending = dict(refs)
        outcomes: list[CellOutcome] = []
        running: set[str] = set()
        clients: dict[str, Any] = {}
        next_status = 0.0
        try:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
                for ref in done:
                    task = pending.pop(ref)
                    outcome = _get(ray, ref, task)
                    outcomes.append(outcome)
                    events("done", task, outcome)
                if pending and time.monotonic() >= next_status:
                    next_status = time.monotonic() + STATUS_EVERY_S
                    for task in started_tasks(list(pending.values()), clients):
                        if task.key not in running:
                            running.add(task.key)
                            events("running", task, None)
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
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


def started_tasks(tasks: list[CellTask], clients: dict[str, Any]) -> list[CellTask]:
    """Those of ``tasks`` whose run is RUNNING in the tracking store (one search per store; ``clients``: the
    MLflow client of each store, made on first use)."""
    from distrepro.tracking.mlflow_client import make_client

    by_uri: dict[str, list[CellTask]] = {}
    for t in tasks:
        by_uri.setdefault(t.tracking_uri, []).append(t)
    out = []
    for uri, group in by_uri.items():
        try:
            client = clients.get(uri) or clients.setdefault(uri, make_client(uri))
            runs = client.search_runs(
                sorted({t.experiment_id for t in group}),
                filter_string="attributes.status = 'RUNNING'",
                max_results=5000,
            )
        except Exception:  # progress is a nicety: a slow store must not stop the campaign
            continue
        live = {r.info.run_id for r in runs}
        out += [t for t in group if t.run_id in live]
    return out
