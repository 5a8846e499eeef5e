"""Train a reproduction's arms: one campaign per arm (every seed), under the reproduction's umbrella run.

With an executor, every arm's cells are submitted at once, so that no worker idles at the end of an arm; without
one, the arms train here one cell after the other. Before anything is opened, a device this host lacks (a gpu
recipe on a laptop) is refused where the cells would train here, and the estimated wall time is printed.
"""

from __future__ import annotations

import sys
import time

from distrepro.config.run_config import RunConfig
from distrepro.hardware.device import resolve_device
from distrepro.orchestration.campaign import CampaignResult, run_campaign
from distrepro.orchestration.executors.interface import Executor
from distrepro.orchestration.executors.selection import ExecutorSpec, make_executor
from distrepro.reproduction.selection import ArmConfig


def trains_here(executor: ExecutorSpec | Executor | None) -> bool:
    """Whether the cells of ``executor`` train on this machine: in this process, a local pool, a local Ray,
    submitit's local mode."""
    if executor is None:
        return True
    if not isinstance(executor, ExecutorSpec):  # an executor already made says so itself
        return not executor.remote
    return bool(
        executor.kind == "local"
        or (executor.kind == "ray" and not executor.ray_address)
        or (executor.kind == "slurm" and executor.slurm_cluster == "local")
    )


def check_devices(arms: list[ArmConfig], executor: ExecutorSpec | Executor | None) -> None:
    """A device this host lacks is one line now, before the reproduction's run is opened (a remote worker checks
    its own)."""
    if trains_here(executor):
        for arm in arms:
            resolve_device(arm.config.device, arm.path)


def say_estimate(paper: str, scale: str, arms: list[ArmConfig], uri: str) -> None:
    """Print the estimated wall time (:mod:`distrepro.orchestration.estimate`: from earlier runs of the same configs,
    else from the suite's recorded session of ``paper`` at ``scale``) before anything trains."""
    from distrepro.orchestration.estimate import estimate_line
    from distrepro.tracking.mlflow_client import experiment_name, make_client

    client = make_client(uri)
    exp = client.get_experiment_by_name(experiment_name(paper))
    named = [(arm.name, arm.config) for arm in arms]
    line = estimate_line(paper, named, client, exp.experiment_id if exp else None, scale)
    print(line, file=sys.stderr, flush=True)


def _executor(spec: ExecutorSpec | Executor | None, cfgs: list[RunConfig]) -> Executor | None:
    """The executor of ``spec``; ``None`` trains the arms here, one cell after the other."""
    if spec is None or not isinstance(spec, ExecutorSpec):
        return spec
    return make_executor(spec, cfgs)


def train_arms(
    arms: list[ArmConfig],
    executor: ExecutorSpec | Executor | None,
    uri: str,
    umbrella_run_id: str,
    show_progress: bool | None,
    system_metrics: bool,
    resumes: dict[str, str] | None = None,
    exploratory: bool = False,
) -> dict[str, CampaignResult]:
    """One campaign per arm, each naming the umbrella run; returns them by arm name. ``resumes``: arm name → the
    campaign run it continues (``reproduce --resume``); the other arms start new campaigns. ``exploratory``: the
    reproduction runs seeds outside its scale's record, and its arms and seeds are tagged so."""
    resumes = resumes or {}
    if not arms:
        return {}
    pool = _executor(executor, [arm.config for arm in arms])
    if pool is not None:
        from distrepro.orchestration.executors.dispatch import CampaignRequest, run_campaigns

        requests = [
            CampaignRequest(
                arm.config,
                arm.path,
                resume=resumes.get(arm.name),
                reproduction=umbrella_run_id,
                system_metrics=system_metrics,
                exploratory=exploratory,
            )
            for arm in arms
        ]
        done = run_campaigns(requests, pool, show_progress)
        return {arm.name: result for arm, result in zip(arms, done, strict=True)}
    return _one_after_the_other(arms, uri, umbrella_run_id, show_progress, system_metrics, resumes, exploratory)


def _clock(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def _one_after_the_other(
    arms: list[ArmConfig],
    uri: str,
    umbrella_run_id: str,
    show_progress: bool | None,
    system_metrics: bool,
    resumes: dict[str, str],
    exploratory: bool,
) -> dict[str, CampaignResult]:
    """The arms here, in order, each announced with the cell counter, the arm's name and an ETA (the mean wall time
    of the cells so far times the cells left), as the executors' cell lines say it."""
    total = sum(len(arm.config.seeds) for arm in arms)
    start, done, out = time.perf_counter(), 0, {}
    for k, arm in enumerate(arms, 1):
        n = len(arm.config.seeds)
        elapsed = time.perf_counter() - start
        eta = f"ETA {_clock(elapsed / done * (total - done))}" if done else "ETA – (after the first arm)"
        print(
            f"[arm {k}/{len(arms)} {arm.name}] cells {done + 1}–{done + n} of {total} · {_clock(elapsed)} elapsed"
            f" · {eta}",
            file=sys.stderr,
            flush=True,
        )
        out[arm.name] = run_campaign(
            arm.config,
            source=arm.path,
            show_progress=show_progress,
            tracking_uri=uri,
            resume=resumes.get(arm.name),
            reproduction=umbrella_run_id,
            system_metrics=system_metrics,
            exploratory=exploratory,
        )
        done += n
    return out
