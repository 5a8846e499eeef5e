"""Train a reproduction's arms: one campaign per arm (every seed), under the reproduction's umbrella run.

With an executor, every arm's cells are submitted at once, so that no worker idles at the end of an arm; without
one, the arms train here one cell after the other. Before anything is opened, a device this host lacks (a gpu
recipe on a laptop) is refused where the cells would train here, and the estimated wall time is printed.
"""

from __future__ import annotations

import sys

from distrepro.config.run_config import RunConfig
from distrepro.engine.device import resolve_device
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


def say_estimate(paper: str, arms: list[ArmConfig], uri: str) -> None:
    """Print the estimated wall time (:mod:`distrepro.orchestration.estimate`) before anything trains."""
    from distrepro.orchestration.estimate import estimate_line
    from distrepro.tracking.mlflow_client import experiment_name, make_client

    client = make_client(uri)
    exp = client.get_experiment_by_name(experiment_name(paper))
    named = [(arm.name, arm.config) for arm in arms]
    print(estimate_line(paper, named, client, exp.experiment_id if exp else None), file=sys.stderr, flush=True)


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
) -> dict[str, CampaignResult]:
    """One campaign per arm, each naming the umbrella run; returns them by arm name."""
    pool = _executor(executor, [arm.config for arm in arms])
    if pool is not None:
        from distrepro.orchestration.executors.dispatch import CampaignRequest, run_campaigns

        requests = [
            CampaignRequest(arm.config, arm.path, reproduction=umbrella_run_id, system_metrics=system_metrics)
            for arm in arms
        ]
        done = run_campaigns(requests, pool, show_progress)
        return {arm.name: result for arm, result in zip(arms, done, strict=True)}
    return {
        arm.name: run_campaign(
            arm.config,
            source=arm.path,
            show_progress=show_progress,
            tracking_uri=uri,
            reproduction=umbrella_run_id,
            system_metrics=system_metrics,
        )
        for arm in arms
    }
