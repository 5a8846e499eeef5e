"""A campaign: one ``distrepro run`` of a config over its seeds, logged to MLflow.

The parent run stands for the campaign; each (method, profile, seed) is a child run with the
resolved config as params, provenance and time-model tags, metrics written in batches, and the
timeline, evaluation table, config and profile as artifacts. Every job is built (and so every
input validated) before the first one trains, so a typo in seed 3's profile cannot waste the
first two seeds' time.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from distrepro.config.run_config import RunConfig
from distrepro.engine.torch_threads import resolve_threads
from distrepro.errors import ConfigError, StoreUnavailable
from distrepro.hardware.device import resolve_device
from distrepro.job.engine import Engine
from distrepro.job.observer import RunObserver
from distrepro.job.resolve import Job, build_job, warn_time_fallbacks
from distrepro.job.results import RunResult
from distrepro.orchestration.arm_summary import CHILD_DESCRIPTION, describe_parent, log_arm_summary
from distrepro.orchestration.budget_check import check_budget
from distrepro.orchestration.cell_summary import csv_text, evals_table, summary_metrics, timeline_table
from distrepro.orchestration.divergence import DIVERGED_TAG, divergence
from distrepro.orchestration.heartbeat import Steps, heartbeat, watched
from distrepro.orchestration.machine_memory import check_memory
from distrepro.orchestration.progress import ProgressObserver, progress_bars, wants_bars
from distrepro.orchestration.resume import ResumePlan, ResumeTarget, SeedPlan, check_campaign, plan_seeds
from distrepro.tracking.campaign_lock import CampaignLock
from distrepro.tracking.campaign_run import Campaign
from distrepro.tracking.mlflow_client import (
    DESCRIPTION_TAG,
    REPRODUCTION_TAG,
    experiment_name,
    make_client,
    resolve_tracking_uri,
)
from distrepro.tracking.run_observer import MlflowRunSink
from distrepro.tracking.run_start import first_start, set_start_time
from distrepro.tracking.runlog import RunLogger, check_system_metrics, flatten_params, logged_params
from distrepro.tracking.storeguard import after_the_fault
from distrepro.tracking.storeprobe import check_store
from distrepro.tracking.ui_view import EXPLORATORY_TAG


@dataclass
class CellResult:
    seed: int
    run_id: str
    result: RunResult


@dataclass
class CampaignResult:
    experiment: str
    parent_run_id: str
    tracking_uri: str
    cells: list[CellResult]
    experiment_id: str = ""
    #: cells that ended FAILED or KILLED (an executor reports them instead of raising): the command fails
    failed: int = 0
    #: every seed of the campaign with a FINISHED run, those of earlier sessions included (a resumed campaign's
    #: ``cells`` are only the seeds trained in this session; its verdicts read all of these)
    finished_seeds: tuple[int, ...] = ()


def get_engine(name: str) -> Engine:
    if name == "inprocess":
        from distrepro.engine.inprocess.run import InProcessEngine

        return InProcessEngine()
    if name == "dist":
        from distrepro.engine.multiprocess.launch import DistEngine

        return DistEngine()
    raise ConfigError(None, "engine", f"unknown engine '{name}'; use 'inprocess' or 'dist'")


def run_tags(job: Job, engine: str) -> dict[str, str]:
    cfg = job.config
    return {
        "distrepro.paper": cfg.paper or "adhoc",
        "distrepro.method": cfg.method,
        "distrepro.method_kind": job.method.paper.get("kind", "unknown"),
        "distrepro.profile": job.profile.name,
        "distrepro.profile_variant": cfg.profile_variant or "",
        "distrepro.profile_sha256": job.profile.digest(),
        "distrepro.seed": str(job.seed),
        "distrepro.engine": engine,
        "distrepro.world_size": str(job.world_size),
        "distrepro.dataset": cfg.dataset.name,
        "distrepro.model": cfg.model.name,
        "distrepro.emulated_workload": cfg.emulated_workload or "",
        "distrepro.budget": f"{cfg.budget.amount:g} {cfg.budget.unit}",
        "distrepro.scale": cfg.scale,
        "distrepro.config_sha256": config_digest(cfg),
        "distrepro.torch_threads": "{} ({})".format(*resolve_threads(cfg.torch_threads))
        if engine == "inprocess"
        else "per rank (dist.threads_per_rank, else the host's CPUs shared)",
        **job.describe_time_model(),
    }


def config_digest(cfg: RunConfig) -> str:
    """sha256 of the resolved config without its seeds: the same arm across seeds shares it."""
    data = cfg.model_dump(mode="json")
    data.pop("seeds", None)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def cell_params(config_dict: dict[str, Any], job: Job) -> dict[str, str]:
    """A cell's params as its child run logs them: the config plus what the code resolved."""
    return logged_params(
        {
            **config_dict,
            "seed": job.seed,
            "method_params": job.params.model_dump(mode="json"),
            "batch_sizes": list(job.batch_sizes),
        }
    )


@dataclass
class PreparedCampaign:
    """A campaign with every job built and its resume plan made, before its parent run starts."""

    cfg: RunConfig
    source: str | Path | None
    uri: str
    resume: str | None
    target: ResumeTarget | None
    engine: Engine
    jobs: list[Job]
    params: dict[int, dict[str, str]]
    plan: ResumePlan
    campaign: Campaign


def prepare_campaign(
    cfg: RunConfig,
    source: str | Path | None,
    uri: str,
    resume: str | None,
    reproduction: str | None = None,
    system_metrics: bool = False,
    trains_here: bool = True,
    exploratory: bool = False,
) -> PreparedCampaign:
    """Check ``resume``, build every job (so every input is validated) and plan each seed; nothing is logged.

    ``reproduction`` is the id of the ``reproduce`` run the campaign belongs to (tag ``distrepro.reproduction``);
    ``system_metrics`` samples MLflow's ``system/*`` metrics in every child run. ``trains_here``: the cells train
    on this machine, so a ``device: cuda`` it cannot honour is refused now (a remote executor's workers check it
    where they train: a SLURM login node has no GPU, its compute nodes do). ``exploratory``: an arm of an exploratory
    reproduction, tagged :data:`~distrepro.tracking.ui_view.EXPLORATORY_TAG` with its seeds (they inherit the
    campaign's tags), so the runs table shows it apart from the confirmatory runs."""
    if system_metrics:
        check_system_metrics()
    if trains_here:
        resolve_device(cfg.device, source)
    target = check_campaign(cfg, uri, resume) if resume else None
    lock = None
    if resume:  # owned before its seeds are planned: a live writer's RUNNING seed is not a dead one
        lock = CampaignLock(make_client(uri), resume)
        lock.acquire()
    try:
        return _prepare(cfg, source, uri, resume, target, lock, reproduction, system_metrics, trains_here, exploratory)
    except BaseException:
        if lock is not None:
            lock.release()
        raise


def _prepare(
    cfg: RunConfig,
    source: str | Path | None,
    uri: str,
    resume: str | None,
    target: ResumeTarget | None,
    lock: CampaignLock | None,
    reproduction: str | None,
    system_metrics: bool,
    trains_here: bool,
    exploratory: bool = False,
) -> PreparedCampaign:
    engine = get_engine(cfg.engine)
    jobs: list[Job] = []
    bundle = None
    for seed in cfg.seeds:
        job = build_job(cfg, seed, source, bundle)
        bundle = job.bundle
        jobs.append(job)
    check_budget(jobs[0], source)  # seeds share budget and profile: a run that cannot finish is refused once
    if trains_here:  # replicas that cannot fit in this machine's memory: refused before a run exists
        check_memory(jobs[0], source)
    warn_time_fallbacks(jobs)
    config_dict = cfg.model_dump(mode="json")
    params = {job.seed: cell_params(config_dict, job) for job in jobs}
    plan = ResumePlan({seed: SeedPlan(seed) for seed in params})
    if target is not None:  # every child is checked against its cell before anything is reopened
        plan = plan_seeds(make_client(uri), target, params, cfg.checkpoint.dir)
        if target.status == "RUNNING":
            print(
                f"campaign run {resume} is still marked RUNNING: resuming it as one whose process died", file=sys.stderr
            )
    experiment = experiment_name(cfg.paper)
    tags = {"distrepro.paper": cfg.paper or "adhoc", "distrepro.campaign": cfg.name}
    if reproduction:
        tags[REPRODUCTION_TAG] = reproduction
    if exploratory:
        tags[EXPLORATORY_TAG] = "true"
    campaign_params = None if resume else flatten_params(config_dict)
    campaign = Campaign(
        experiment,
        cfg.name,
        tags,
        campaign_params,
        tracking_uri=uri,
        resume_run_id=resume,
        system_metrics=system_metrics,
        lock=lock,
    )
    return PreparedCampaign(cfg, source, uri, resume, target, engine, jobs, params, plan, campaign)


def begin_campaign(prep: PreparedCampaign) -> None:
    """Inside ``with prep.campaign``: the config artifact (a new campaign), and stale children marked FAILED."""
    campaign = prep.campaign
    if REPRODUCTION_TAG in campaign.tags:  # an arm of `reproduce`: its id, for `run ARM.yaml --resume ID`
        print(
            f"arm {prep.cfg.name}: campaign run {campaign.run_id} "
            f"({'resumed' if prep.resume else 'started'}, reproduction {campaign.tags[REPRODUCTION_TAG]})",
            file=sys.stderr,
            flush=True,
        )
    else:  # said when it starts, not when it ends: after a kill the id is what `--resume` needs (stdout: a result,
        how = "resumed" if prep.resume else "started"  # where stderr holds only what went wrong)
        print(f"campaign run {campaign.run_id} {how} (continue it with --resume {campaign.run_id})", flush=True)
    if not prep.resume:
        campaign.log_text(yaml.safe_dump(prep.cfg.model_dump(mode="json"), sort_keys=False), "config.yaml")
        campaign.set_tags({DESCRIPTION_TAG: describe_parent(prep.cfg.name, len(prep.cfg.seeds))})
    assert campaign.client is not None
    for run_id in prep.plan.stale:  # left RUNNING by a process (or server) that died: they will never finish
        campaign.client.set_terminated(run_id, "FAILED")


def last_cell_end(children: list[Any]) -> int | None:
    """When the campaign's last cell run (of ``children``) ended (ms), or None while one is still open: the arm's
    run ends then, so its Duration in the runs table is the arm's, not the reproduction's (all arms close together
    under ``--jobs``); it starts when its first cell did (:mod:`distrepro.tracking.run_start`)."""
    ends = [run.info.end_time for run in children]
    if not ends or any(end is None for end in ends):
        return None
    return max(ends)


def end_campaign(prep: PreparedCampaign, trained: set[int]) -> tuple[int, ...]:
    """The arm's aggregates on the parent (:mod:`distrepro.orchestration.arm_summary`: the runs table's metric columns);
    the parent is FAILED (and says which seeds to ``--resume``) unless every seed has a FINISHED run. Returns the
    seeds with a FINISHED run, this session's and earlier ones'."""
    log_arm_summary(prep.campaign)
    children = prep.campaign.children()
    prep.campaign.parent.end_time_ms = last_cell_end(children)
    start = first_start(children)
    if start is not None and not prep.resume:  # a resumed campaign keeps its first attempt's start
        assert prep.campaign.client is not None and prep.campaign.run_id is not None
        set_start_time(prep.campaign.client, prep.campaign.run_id, start)
    finished = {p.seed for p in prep.plan.seeds.values() if p.finished} | trained
    missing = sorted(set(prep.target.seeds if prep.target else prep.cfg.seeds) - finished)
    if missing:  # some seeds failed, or only some of the campaign's seeds were resumed: the campaign is not done
        campaign = prep.campaign
        print(f"campaign run {campaign.run_id}: seeds {missing} still to run (--resume again)", file=sys.stderr)
        campaign.parent.finish("FAILED")
    return tuple(sorted(finished))


def run_campaign(
    cfg: RunConfig,
    source: str | Path | None = None,
    show_progress: bool | None = None,
    tracking_uri: str | None = None,
    resume: str | None = None,
    reproduction: str | None = None,
    system_metrics: bool = False,
    exploratory: bool = False,
) -> CampaignResult:
    """Train ``cfg`` once per seed and log everything; returns the results and run ids.

    The tracking store is checked first (:func:`distrepro.tracking.storeprobe.check_store`), so a store that
    cannot be used is one line before any job is built. ``resume`` is the run id of an unfinished
    campaign (its parent run), continued only under the same config (:mod:`distrepro.orchestration.resume`): seeds
    that finished are skipped, the others continue from their latest complete checkpoint
    (``checkpoint.every_steps``, distributed engine) or start over in a new child run.
    ``reproduction``, ``system_metrics`` and ``exploratory``: see :func:`prepare_campaign`.

    The cells train here, one after the other (``--jobs 1``); elsewhere, through
    :func:`distrepro.orchestration.executors.dispatch.run_campaigns`, which shares this module's steps.
    """
    uri = tracking_uri or resolve_tracking_uri()
    check_store(uri)
    with watched(Steps(cfg.name or cfg.method)) as preparing:  # a dataset generated or read: tens of seconds
        preparing.enter(f"building the dataset and the jobs of {len(cfg.seeds)} seed(s)")
        prep = prepare_campaign(cfg, source, uri, resume, reproduction, system_metrics, exploratory=exploratory)
    campaign, experiment = prep.campaign, prep.campaign.experiment
    cells: list[CellResult] = []
    try:
        with campaign, progress_bars(wants_bars(show_progress)) as progress:
            begin_campaign(prep)
            for job in prep.jobs:
                cell = _run_cell(campaign, prep.engine, job, prep.plan.seeds[job.seed], prep.params[job.seed], progress)
                if cell is not None:
                    cells.append(cell)
            finished = end_campaign(prep, {c.seed for c in cells})
    except StoreUnavailable as exc:
        if campaign.run_id is None:
            raise
        how = f"'distrepro run {source or 'CONFIG'} --resume {campaign.run_id}'"
        raise StoreUnavailable(f"{exc}; {after_the_fault(uri, how)}") from exc
    assert campaign.run_id is not None
    return CampaignResult(
        experiment, campaign.run_id, uri, cells, campaign.experiment_id or "", finished_seeds=finished
    )


def _run_cell(
    campaign: Campaign, engine: Engine, job: Job, plan: SeedPlan, params: dict[str, str], progress: Any
) -> CellResult | None:
    """Train one seed as ``plan`` says: skip it, continue its checkpointed run, or start a new run."""
    cfg = job.config
    if plan.finished:
        print(f"seed {job.seed}: finished in run {plan.finished}, skipped", file=sys.stderr)
        return None
    arm = f"{cfg.name} ({cfg.method})" if cfg.name and cfg.name != cfg.method else cfg.method
    label = f"{arm} · {job.profile.name} · seed {job.seed}"  # the arm's name: several arms share a method
    task = progress.add_task(label, total=1000) if progress is not None else None
    logger = open_cell(campaign, job, engine.name, plan, params)
    with logger:
        observer = ProgressObserver(label, progress, task)
        with heartbeat(observer.status, enabled=progress is None):
            result = train_cell(engine, job, logger, observer, plan.checkpoint if plan.reopen else None)
    return CellResult(job.seed, logger.run_id, result)


def open_cell(campaign: Campaign, job: Job, engine_name: str, plan: SeedPlan, params: dict[str, str]) -> RunLogger:
    """The child run a seed trains into, as ``plan`` says: reopened (checkpoint), or new with its config artifacts."""
    cfg = job.config
    if plan.reopen:
        logger = campaign.reopen_child(plan.reopen)
        print(f"seed {job.seed}: resuming run {plan.reopen} from checkpoint {plan.checkpoint}", file=sys.stderr)
    else:
        tags = run_tags(job, engine_name)
        if plan.replaces:
            tags["distrepro.resumes"] = plan.replaces
        tags[DESCRIPTION_TAG] = CHILD_DESCRIPTION
        logger = campaign.child(f"{cfg.name}/s{job.seed}", params, tags)
        if plan.replaces:
            print(
                f"seed {job.seed}: run {plan.replaces} has no checkpoint; starting over in run {logger.run_id}",
                file=sys.stderr,
            )
    if not plan.reopen:
        with _closed_on_error(logger):
            resolved = {**cfg.model_dump(mode="json"), "seed": job.seed}
            logger.log_text(yaml.safe_dump(resolved, sort_keys=False), "config.resolved.yaml")
            logger.log_text(yaml.safe_dump(job.profile.to_yaml_dict(), sort_keys=False), "profile.yaml")
            if job.method.readme is not None:
                logger.log_text(job.method.readme.read_text(encoding="utf-8"), "method_README.md")
    return logger


@contextlib.contextmanager
def _closed_on_error(logger: RunLogger) -> Iterator[None]:
    try:
        yield
    except BaseException as exc:
        logger.__exit__(type(exc), exc, exc.__traceback__)
        raise


def train_cell(
    engine: Engine, job: Job, logger: RunLogger, observer: RunObserver | None, resume_from: Path | None = None
) -> RunResult:
    """Train ``job`` into ``logger``'s run, then log its summary metrics and tables (wherever it runs)."""
    result = engine.run_cell(job, MlflowRunSink(logger), observer, resume_from=resume_from)
    logger.log_summary(summary_metrics(job, result))
    diverged = divergence(result)
    if diverged is not None:  # a NaN metric reads as "not logged" in the report's table: said as a tag instead
        logger.set_tags({DIVERGED_TAG: diverged})
    logger.log_text(csv_text(evals_table(result)), "evals.csv")
    logger.log_text(csv_text(timeline_table(result)), "timeline.csv")
    return result
