"""Campaigns whose cells run elsewhere: prepared here, trained by an executor, closed here.

The campaign's process does everything that decides *what* runs and *where it is logged*, before any
cell is submitted: it checks the store (a remote executor refuses a store its workers cannot reach),
builds every job of every campaign (so every input error is one line before anything is queued), opens
each campaign's parent run and creates each cell's child run, SCHEDULED, with its params, tags and config
artifacts. The executor only trains: a worker rebuilds the job from the cell's config and logs metrics
and the summary into the child run it was given. So the parent holds its children wherever they ran, the
report reads MLflow only, and a child that never started (a cancelled job) is still there, KILLED.

Several campaigns go to one executor together (``reproduce``: every arm at once), so the pool never
idles at an arm's last seed while the next arm's cells wait.

A cell that fails does not stop the others. Its run is FAILED with the reason in the ``distrepro.failure``
tag (set by the worker, or here when the worker died without a word); its campaign is FAILED and names
the seeds to ``--resume``, which re-submits only the cells without a FINISHED run.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distrepro.config.run_config import RunConfig
from distrepro.errors import DistreproError, StoreUnavailable
from distrepro.orchestration.campaign import (
    CampaignResult,
    CellResult,
    PreparedCampaign,
    begin_campaign,
    end_campaign,
    open_cell,
    prepare_campaign,
)
from distrepro.orchestration.executors.cell_progress import CellProgress
from distrepro.orchestration.executors.cell_task import FAILURE_TAG, CellOutcome, CellTask
from distrepro.orchestration.heartbeat import Steps, heartbeat, watched
from distrepro.orchestration.progress import progress_bars, wants_bars
from distrepro.tracking.mlflow_client import resolve_tracking_uri
from distrepro.tracking.runlog import check_system_metrics
from distrepro.tracking.storeguard import after_the_fault
from distrepro.tracking.storeprobe import check_store, sqlite_path


class RemoteStoreError(DistreproError):
    """A remote executor was given a tracking store that only this machine can write."""


@dataclass
class CampaignRequest:
    """One campaign to run: a resolved config, the file it came from, ``--resume`` if any, the ``reproduce``
    run it belongs to (tag ``distrepro.reproduction``) if any, and whether its cells sample MLflow's system
    metrics (``--system-metrics``: in the worker that trains the cell, not here)."""

    cfg: RunConfig
    source: str | Path | None = None
    resume: str | None = None
    reproduction: str | None = None
    system_metrics: bool = False
    exploratory: bool = False  # an arm of an exploratory reproduction (tracking.ui_view.EXPLORATORY_TAG)


def check_remote_store(uri: str, executor: Any) -> None:
    """Cells on other machines log to MLflow themselves: refuse a store that lives in this machine's files."""
    if not executor.remote:
        return
    local = sqlite_path(uri) is not None or uri.startswith("file:") or "://" not in uri
    if local:
        raise RemoteStoreError(
            f"--executor {executor.name}: cells run on other machines and log there, but tracking store {uri} is a "
            "local file; start a tracking server (mlflow server --host 0.0.0.0 --port 5000 --backend-store-uri "
            "sqlite:///mlflow.db) and set MLFLOW_TRACKING_URI=http://<this host>:5000"
        )


def run_campaigns(
    requests: list[CampaignRequest],
    executor: Any,
    show_progress: bool | None = None,
    tracking_uri: str | None = None,
) -> list[CampaignResult]:
    """Run the cells of every campaign in ``requests`` on ``executor``; one result per request, in order."""
    uri = tracking_uri or resolve_tracking_uri()
    check_remote_store(uri, executor)
    check_store(uri)
    if any(r.system_metrics for r in requests):  # no psutil here: one line before anything starts
        check_system_metrics()
    start, close = getattr(executor, "start", None), getattr(executor, "close", None)
    if start is not None:  # e.g. pool workers import torch and mlflow while the jobs are built
        start()
    preparing = Steps("distrepro")  # building the datasets can take minutes: a heartbeat names it with a count
    prepared: list[PreparedCampaign] = []
    try:
        here = not executor.remote  # a remote worker checks its own device (prepare_campaign)
        with watched(preparing):
            preparing.enter("building the datasets and jobs", total=len(requests), unit="campaign")
            for r in requests:
                prepared.append(
                    prepare_campaign(
                        r.cfg, r.source, uri, r.resume, r.reproduction, trains_here=here, exploratory=r.exploratory
                    )
                )
                preparing.advance()
    except BaseException:
        _release(prepared)  # a resumed campaign is locked once prepared
        if close is not None:
            close()
        raise
    try:
        with contextlib.ExitStack() as stack:
            for prep in prepared:
                stack.enter_context(prep.campaign)
                begin_campaign(prep)
            tasks, loggers = _schedule(prepared, executor, [r.system_metrics for r in requests])
            print(
                f"distrepro: {len(tasks)} cell(s) of {len(prepared)} campaign(s) on {executor.describe()}",
                file=sys.stderr,
                flush=True,
            )
            seen: dict[str, CellOutcome] = {}  # every outcome as it comes: an interrupt loses the executor's list
            with progress_bars(wants_bars(show_progress)) as bars:
                progress = CellProgress(len(tasks), getattr(executor, "jobs", None), bars)

                def events(kind: str, task: CellTask, outcome: CellOutcome | None) -> None:
                    if kind == "done" and outcome is not None:
                        seen[task.key] = outcome
                    progress(kind, task, outcome)

                try:  # a heartbeat repeats the cell counts while long cells finish nothing (the lines come per cell)
                    with heartbeat(progress.line, enabled=bars is None):
                        outcomes = executor.run(tasks, events) if tasks else []
                except KeyboardInterrupt:
                    _keep_closed(loggers, seen)
                    raise
            return _close(prepared, tasks, loggers, outcomes)
    except StoreUnavailable as exc:
        started = [p for p in prepared if p.campaign.run_id is not None]
        if not started:
            raise
        how = "; ".join(f"'distrepro run {p.source or 'CONFIG'} --resume {p.campaign.run_id}'" for p in started)
        raise StoreUnavailable(f"{exc}; {after_the_fault(uri, how)}") from exc
    finally:
        _release(prepared)  # those whose run never opened (an earlier one's failed): their exit did not


def _release(prepared: list[PreparedCampaign]) -> None:
    for prep in prepared:
        prep.campaign.release_lock()


def _schedule(
    prepared: list[PreparedCampaign], executor: Any, system_metrics: list[bool]
) -> tuple[list[CellTask], dict[str, tuple[int, Any]]]:
    """A child run per cell to train (SCHEDULED until a worker takes it), and its task; by task key, the
    index of its campaign and this process's handle on its run. ``system_metrics[i]``: campaign ``i``'s cells
    sample system metrics in their worker (this process's handles on the runs never sample: a cell waiting
    in the queue would log the machine's load before it started)."""
    import os

    tasks: list[CellTask] = []
    loggers: dict[str, tuple[int, Any]] = {}
    threads = int(getattr(executor, "threads", 0) or 1)
    for index, prep in enumerate(prepared):
        campaign = prep.campaign
        assert campaign.client is not None and campaign.run_id is not None
        config = prep.cfg.model_dump(mode="json")
        for job in prep.jobs:
            plan = prep.plan.seeds[job.seed]
            if plan.finished:
                print(f"{prep.cfg.name} seed {job.seed}: finished in run {plan.finished}, skipped", file=sys.stderr)
                continue
            logger = open_cell(campaign, job, prep.engine.name, plan, prep.params[job.seed])
            campaign.client.update_run(logger.run_id, status="SCHEDULED")
            per_cell = prep.cfg.torch_threads or threads
            cpus = (
                per_cell if prep.cfg.engine == "inprocess" else job.world_size * (prep.cfg.dist.threads_per_rank or 1)
            )
            task = CellTask(
                key=f"{prep.cfg.name}/s{job.seed}",
                campaign=prep.cfg.name,
                label=f"{prep.cfg.name} · seed {job.seed}",
                config=config,
                seed=job.seed,
                source=str(prep.source) if prep.source is not None else None,
                tracking_uri=prep.uri,
                experiment_id=campaign.experiment_id or "",
                parent_run_id=campaign.run_id,
                run_id=logger.run_id,
                threads=per_cell,
                cpus=cpus,
                world_size=job.world_size,
                engine=prep.cfg.engine,
                roots=os.environ.get("DISTREPRO_PATH", ""),
                resume_from=str(plan.checkpoint) if plan.reopen and plan.checkpoint else None,
                executor=executor.name,
                system_metrics=system_metrics[index],
            )
            tasks.append(task)
            loggers[task.key] = (index, logger)
    return tasks, loggers


def _keep_closed(loggers: dict[str, tuple[int, Any]], seen: dict[str, CellOutcome]) -> None:
    """On Ctrl-C: the cells that had ended (their worker closed the run, FINISHED or FAILED) keep that status; the
    campaign's exit marks only the others KILLED, and ``--resume`` skips the finished ones."""
    for key, outcome in seen.items():
        if outcome.closed or outcome.status == "FINISHED":
            loggers[key][1].status = outcome.status


def _close(
    prepared: list[PreparedCampaign],
    tasks: list[CellTask],
    loggers: dict[str, tuple[int, Any]],
    outcomes: list[CellOutcome],
) -> list[CampaignResult]:
    """Close each child as its outcome says, then each campaign: FINISHED only when every seed has finished."""
    by_key = {o.key: o for o in outcomes}
    failures: dict[int, list[str]] = {}
    cells: dict[int, list[CellResult]] = {}
    for task in tasks:
        owner, logger = loggers[task.key]
        outcome = by_key.get(task.key)
        if outcome is not None and outcome.status == "FINISHED" and outcome.result is not None:
            logger.status = "FINISHED"  # the worker closed it; this process's handle must not close it again
            cells.setdefault(owner, []).append(CellResult(task.seed, task.run_id, outcome.result))
            continue
        reason = outcome.reason if outcome is not None else "the executor returned no outcome for it"
        failures.setdefault(owner, []).append(f"seed {task.seed} (run {task.run_id}): {reason}")
        if outcome is not None and outcome.closed:
            logger.status = outcome.status
        else:  # the worker died or never started: this process closes the run and says why
            logger.set_tags({FAILURE_TAG: (reason or "")[:7000]})
            logger.finish("FAILED")
    results = []
    for index, prep in enumerate(prepared):
        done = sorted(cells.get(index, []), key=lambda c: c.seed)
        for line in failures.get(index, []):
            print(f"distrepro: campaign {prep.cfg.name}: FAILED {line}", file=sys.stderr)
        finished = end_campaign(prep, {c.seed for c in done})
        campaign = prep.campaign
        assert campaign.run_id is not None
        results.append(
            CampaignResult(
                campaign.experiment,
                campaign.run_id,
                prep.uri,
                done,
                campaign.experiment_id or "",
                failed=len(failures.get(index, [])),
                finished_seeds=finished,
            )
        )
    return results
