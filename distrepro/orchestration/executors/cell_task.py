"""One campaign cell (arm × seed) as a self-contained task, and the function that runs it anywhere.

Why a task and not a :class:`~distrepro.job.resolve.Job`: a job holds torch modules and a loaded
dataset, which cannot travel to a Ray worker or a SLURM node. A :class:`CellTask` holds only what
rebuilds the job there (the resolved config as JSON, the seed, the plugin roots) and where to log it
(the tracking URI and the child run, created by the campaign before submission). Seeds are derived from
the config and the seed index, never drawn, so the job rebuilt on another machine trains exactly as it
would have here (:mod:`distrepro.seeding`).

:func:`run_cell_task` is the one body every executor runs, in the campaign's process (``--jobs 1``), in a
pool worker, in a Ray task or inside a SLURM job. It never raises for a failed cell: the child run is
closed FAILED with the reason in its ``distrepro.failure`` tag and the outcome says so, so that one
cell's error does not stop the others. Ctrl-C (``KeyboardInterrupt``) does propagate, after the run is
marked KILLED.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from distrepro.data.loading import DatasetBundle
    from distrepro.job.observer import RunObserver
    from distrepro.job.results import RunResult

#: tag on a child run that did not finish: why (the exception, or how its worker died)
FAILURE_TAG = "distrepro.failure"
#: tag naming where a cell ran (host, pid, executor), for finding its logs and processes
WORKER_TAG = "distrepro.worker"
#: the torch threads a cell ran with (the campaign tags its own guess; a worker that sets them says so)
THREADS_TAG = "distrepro.torch_threads"

CellStatus = Literal["FINISHED", "FAILED", "KILLED"]


@dataclass(frozen=True)
class CellTask:
    """Everything a worker needs to train one cell and log it to its (already created) child run."""

    key: str  # unique within a submission: "<campaign>/s<seed>"
    campaign: str  # the campaign's name (its config's ``name``): per-arm executor settings are keyed by it
    label: str  # for people: "method · profile · seed N"
    config: dict[str, Any]  # RunConfig.model_dump(mode="json")
    seed: int
    source: str | None  # the config file, for error messages and method lookup beside it
    tracking_uri: str
    experiment_id: str
    parent_run_id: str
    run_id: str  # the child run, SCHEDULED until the cell starts
    threads: int  # torch threads when the config sets none
    cpus: int  # cores the cell occupies (threads, or ranks × threads for the dist engine)
    world_size: int
    engine: str
    roots: str = ""  # DISTREPRO_PATH of the submitting process: the user's plugin roots
    resume_from: str | None = None  # a complete checkpoint folder (dist engine) to continue from
    executor: str = "local"
    #: ``--system-metrics``: the worker samples MLflow's ``system/*`` metrics into the run while the cell trains
    system_metrics: bool = False


@dataclass
class CellOutcome:
    """What became of a cell; ``result`` only when it FINISHED."""

    key: str
    seed: int
    run_id: str
    status: CellStatus
    reason: str | None = None
    result: RunResult | None = None
    wall_s: float = 0.0
    worker: str = ""
    #: True when the worker closed the run itself; False when it died and the campaign must close it
    closed: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


def worker_tags(task: CellTask, where: str) -> dict[str, str]:
    """The tags a worker adds to its cell's run: where it ran and, for a cell whose config sets no
    ``torch_threads``, the threads the executor gave it (the campaign tagged the run with its own process's
    default before the cell was queued, which a pool of one-thread cells does not use)."""
    tags = {WORKER_TAG: where}
    if not task.config.get("torch_threads"):
        tags[THREADS_TAG] = f"{task.threads} (set by the {task.executor} executor)"
    return tags


def failed(task: CellTask, reason: str, closed: bool = False, wall_s: float = 0.0) -> CellOutcome:
    """The outcome of a cell whose worker could not report (it died, was cancelled, its job failed)."""
    return CellOutcome(task.key, task.seed, task.run_id, "FAILED", reason, wall_s=wall_s, closed=closed)


def worker_name(executor: str) -> str:
    return f"{socket.gethostname()}:{os.getpid()} ({executor})"


_BUNDLES: dict[str, DatasetBundle] = {}


def _bundle_key(config: dict[str, Any]) -> str:
    import json

    return json.dumps(config.get("dataset"), sort_keys=True, default=str)


def run_cell_task(task: CellTask, observer: RunObserver | None = None) -> CellOutcome:
    """Train ``task``'s cell and log it to its child run; the outcome, never an exception (but Ctrl-C).

    A worker that runs several cells keeps one dataset per dataset config, as a campaign in one process
    shares one across its seeds (building it is deterministic, so sharing changes no result).
    """
    t0 = time.perf_counter()
    if task.roots:
        os.environ["DISTREPRO_PATH"] = task.roots
    import torch

    from distrepro.config.run_config import validate_config
    from distrepro.job.resolve import build_job
    from distrepro.orchestration.campaign import get_engine, train_cell
    from distrepro.tracking.mlflow_client import make_client
    from distrepro.tracking.run_start import now_ms, set_start_time
    from distrepro.tracking.runlog import RunLogger

    if not task.config.get("torch_threads"):
        torch.set_num_threads(task.threads)
    where = worker_name(task.executor)
    client = make_client(task.tracking_uri)
    client.update_run(task.run_id, status="RUNNING")
    if task.resume_from is None:  # a new run starts now, not when it was queued (a reopened one keeps its start)
        set_start_time(client, task.run_id, now_ms())
    sampled = {"tracking_uri": task.tracking_uri} if task.system_metrics else None
    try:  # the sampler runs here, beside the training, on whatever machine that is
        logger = RunLogger(client, task.run_id, system_metrics=sampled)
    except Exception as exc:  # e.g. no psutil on this worker: the campaign closes the run FAILED, saying why
        return failed(task, f"{type(exc).__name__}: {exc}", wall_s=time.perf_counter() - t0)
    try:
        with logger:
            logger.set_tags(worker_tags(task, where))
            cfg = validate_config(task.config, task.source)
            key = _bundle_key(task.config)
            job = build_job(cfg, task.seed, task.source, _BUNDLES.get(key))
            _BUNDLES[key] = job.bundle
            resume = Path(task.resume_from) if task.resume_from else None
            result = train_cell(get_engine(cfg.engine), job, logger, observer, resume)
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}"
        _tag_failure(client, task.run_id, reason)
        return CellOutcome(task.key, task.seed, task.run_id, "FAILED", reason, None, time.perf_counter() - t0, where)
    return CellOutcome(task.key, task.seed, task.run_id, "FINISHED", None, result, time.perf_counter() - t0, where)


def without_models(outcome: CellOutcome) -> CellOutcome:
    """``outcome`` without its trained models, for an executor that ships outcomes back from another process (a
    pool worker, a Ray task, a SLURM job): the campaign reads only the metrics and the runs hold the rest, and a
    ResNet-50 is 100 MB to pickle back per cell. Only a cell run in the campaign's own process keeps them."""
    if outcome.result is not None:
        outcome.result.models = []
    return outcome


def run_cell_task_shipped(task: CellTask) -> CellOutcome:
    """:func:`run_cell_task` for a job whose outcome is pickled back to the campaign (a SLURM job): no models."""
    return without_models(run_cell_task(task))


def _tag_failure(client: Any, run_id: str, reason: str) -> None:
    """Best effort: a store that failed the run cannot always take its reason too."""
    with contextlib.suppress(Exception):  # the outcome still carries the reason to the campaign, which prints it
        client.set_tag(run_id, FAILURE_TAG, reason[:7000])
