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
import io
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from suite.config import RunConfig
from suite.engine.checkpoint import latest_complete
from suite.engine.results import RunResult
from suite.errors import ConfigError
from suite.job import Job, build_job, warn_time_fallbacks
from suite.observer import ProgressObserver, eval_metrics
from suite.runlog import flatten_params
from suite.tracking import Campaign, experiment_name, resolve_tracking_uri


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


def get_engine(name: str) -> Any:
    if name == "inprocess":
        from suite.engine.inprocess import InProcessEngine

        return InProcessEngine()
    if name == "dist":
        from suite.engine.dist_launch import DistEngine

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
        **job.describe_time_model(),
    }


def config_digest(cfg: RunConfig) -> str:
    """sha256 of the resolved config without its seeds: the same arm across seeds shares it."""
    data = cfg.model_dump(mode="json")
    data.pop("seeds", None)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def summary_metrics(job: Job, result: RunResult) -> dict[str, float]:
    final = result.final
    out = {f"final/{k}": v for k, v in final.metrics.items()}
    for r in range(job.world_size):  # the profile's speed for the charged workload: ideal bounds need it
        out[f"worker/{r}/declared_samples_per_s"] = job.compute.declared_samples_per_s(r)
    out.update(
        {
            "final/emulated_s": final.emulated_s,
            "final/wall_s": result.wall_s,
            "final/samples": float(final.samples),
            "final/epochs": final.epoch,
            "final/steps": float(final.step),
            "final/useful_flops_per_emulated_s": final.samples * job.compute.flops_per_sample / final.emulated_s
            if final.emulated_s > 0
            else float("nan"),
        }
    )
    if job.config.target is not None:
        out["target_reached"] = 1.0 if result.time_to_target_s is not None else 0.0
        if result.time_to_target_s is not None:
            out["time_to_target_s"] = result.time_to_target_s
            out["step_to_target"] = float(result.step_to_target or 0)
    return out


def evals_table(result: RunResult) -> pd.DataFrame:
    rows = [{"step": r.step, "final": r.final, **eval_metrics(r)} for r in result.evals]
    return pd.DataFrame(rows)


def timeline_table(result: RunResult) -> pd.DataFrame:
    return pd.DataFrame([vars(s) for s in result.timeline], columns=["rank", "kind", "start_s", "end_s", "step"])


def _csv(df: pd.DataFrame) -> str:
    buf = io.StringIO()
    df.to_csv(buf, index=False)
    return buf.getvalue()


@contextlib.contextmanager
def _progress(enabled: bool) -> Iterator[Any]:
    if not enabled:
        yield None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        transient=False,
    ) as progress:
        yield progress


def run_campaign(
    cfg: RunConfig,
    source: str | Path | None = None,
    show_progress: bool | None = None,
    tracking_uri: str | None = None,
    resume: str | None = None,
) -> CampaignResult:
    """Train ``cfg`` once per seed and log everything; returns the results and run ids.

    ``resume`` is the run id of a failed campaign (its parent run): seeds that finished are
    skipped, failed ones continue in their own MLflow run from their latest complete checkpoint
    (``checkpoint.every_steps``, distributed engine), or start over if there is none.
    """
    engine = get_engine(cfg.engine)
    jobs: list[Job] = []
    bundle = None
    for seed in cfg.seeds:
        job = build_job(cfg, seed, source, bundle)
        bundle = job.bundle
        jobs.append(job)
    warn_time_fallbacks(jobs)
    if show_progress is None:
        show_progress = sys.stderr.isatty()
    uri = tracking_uri or resolve_tracking_uri()
    experiment = experiment_name(cfg.paper)
    config_dict = cfg.model_dump(mode="json")
    cells: list[CellResult] = []
    tags = {"distrepro.paper": cfg.paper or "adhoc", "distrepro.campaign": cfg.name}
    campaign_params = None if resume else flatten_params(config_dict)
    with (
        Campaign(experiment, cfg.name, tags, campaign_params, tracking_uri=uri, resume_run_id=resume) as campaign,
        _progress(show_progress) as progress,
    ):
        previous = {r.data.tags.get("distrepro.seed"): r for r in campaign.children()} if resume else {}
        if not resume:
            campaign.log_text(yaml.safe_dump(config_dict, sort_keys=False), "config.yaml")
        for job in jobs:
            prev = previous.get(str(job.seed))
            if prev is not None and prev.info.status == "FINISHED":
                print(f"seed {job.seed}: finished in run {prev.info.run_id}, skipped", file=sys.stderr)
                continue
            label = f"{cfg.method} · {job.profile.name} · seed {job.seed}"
            task = progress.add_task(label, total=1000) if progress is not None else None
            resume_from = None
            if prev is not None:
                logger = campaign.reopen_child(prev.info.run_id)
                resume_from = latest_complete(cfg.checkpoint.dir / prev.info.run_id)
                where = f"checkpoint {resume_from.name}" if resume_from else "the start (no checkpoint)"
                print(f"seed {job.seed}: resuming run {prev.info.run_id} from {where}", file=sys.stderr)
            else:
                params = flatten_params(
                    {
                        **config_dict,
                        "seed": job.seed,
                        "method_params": job.params.model_dump(mode="json"),
                        "batch_sizes": list(job.batch_sizes),
                    }
                )
                logger = campaign.child(
                    f"{cfg.method}-{job.profile.name}-s{job.seed}", params, run_tags(job, engine.name)
                )
            with logger:
                if prev is None:
                    logger.log_text(
                        yaml.safe_dump({**config_dict, "seed": job.seed}, sort_keys=False), "config.resolved.yaml"
                    )
                    logger.log_text(yaml.safe_dump(job.profile.to_yaml_dict(), sort_keys=False), "profile.yaml")
                    if job.method.readme is not None:
                        logger.log_text(job.method.readme.read_text(encoding="utf-8"), "method_README.md")
                observer = ProgressObserver(label, progress, task)
                if resume_from is not None:
                    result = engine.run_cell(job, logger, observer, resume_from=resume_from)
                else:
                    result = engine.run_cell(job, logger, observer)
                logger.log_summary(summary_metrics(job, result))
                logger.log_text(_csv(evals_table(result)), "evals.csv")
                logger.log_text(_csv(timeline_table(result)), "timeline.csv")
            cells.append(CellResult(job.seed, logger.run_id, result))
        assert campaign.run_id is not None
        return CampaignResult(experiment, campaign.run_id, uri, cells, campaign.experiment_id or "")
