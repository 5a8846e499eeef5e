"""``--executor slurm``: submitit's local executor runs the very submission a SLURM cluster gets (parameters,
setup lines, pickled cell), here; the sbatch script for a real cluster is checked as text."""

from __future__ import annotations

import shlex
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cellruns import campaign_metrics, children, run_on
from clirun import write_config

from distrepro.config.run_config import load_config
from distrepro.config.slurm_block import SlurmBlock
from distrepro.orchestration.campaign import run_campaign
from distrepro.orchestration.executors.cell_task import CellTask
from distrepro.orchestration.executors.selection import ExecutorSpec, make_executor

pytest.importorskip("submitit")

from distrepro.orchestration.executors.slurm_executor import SlurmExecutor, job_parameters, sbatch_script


def _task(engine: str = "inprocess", world: int = 4, cpus: int = 1) -> CellTask:
    return CellTask(
        key="arm/s0", campaign="arm", label="arm · seed 0", config={}, seed=0, source=None,
        tracking_uri="http://mlflow:5000", experiment_id="1", parent_run_id="p", run_id="r",
        threads=1, cpus=cpus, world_size=world, engine=engine,
    )  # fmt: skip


@dataclass
class SlurmCampaign:
    """One campaign of two seeds run in this process and again as a SLURM job array on submitit's local cluster."""

    uri: str
    here: Any
    there: Any
    outcomes: list[Any]  # what the executor read back from the jobs' folders
    jobs: Path


@pytest.fixture(scope="module")
def slurm_campaign(tmp_path_factory: pytest.TempPathFactory, migrated_mlflow_db: Path) -> Iterator[SlurmCampaign]:
    """Run once for the module: each job imports torch and MLflow afresh (several seconds of CPU)."""
    tmp = tmp_path_factory.mktemp("slurm")
    shutil.copyfile(migrated_mlflow_db, tmp / "mlflow.db")
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_TRACKING_URI", uri)
        cfg = load_config(write_config(tmp, name="slurmish", seeds=[0, 1]))
        here = run_campaign(cfg, show_progress=False)
        executor = SlurmExecutor(SlurmBlock(folder=str(tmp / "jobs"), time_min=10, array=True), cluster="local")
        kept: list[Any] = []
        run = executor.run

        def keep(tasks: Any, events: Any) -> Any:
            outcomes = run(tasks, events)
            kept.extend(outcomes)
            return outcomes

        executor.run = keep  # type: ignore[method-assign]
        there = run_on(executor, cfg)
        yield SlurmCampaign(uri, here, there, kept, tmp / "jobs")


def test_submitit_local_runs_the_slurm_path(slurm_campaign: SlurmCampaign) -> None:
    uri, there = slurm_campaign.uri, slurm_campaign.there
    assert campaign_metrics(uri, there.parent_run_id) == campaign_metrics(uri, slurm_campaign.here.parent_run_id)
    runs = children(uri, there.parent_run_id)
    assert len(runs) == 2 and {r.info.status for r in runs.values()} == {"FINISHED"}
    assert all("(slurm)" in r.data.tags["distrepro.worker"] for r in runs.values())
    assert list(slurm_campaign.jobs.glob("*/*_result.pkl"))  # submitit's own job folders


def test_slurm_jobs_return_no_trained_models(slurm_campaign: SlurmCampaign) -> None:
    """The job's outcome is pickled into its folder and read back here: without the models (100 MB for a ResNet-50
    per cell); the metrics come back, the run holds the rest."""
    assert [c.result.models for c in slurm_campaign.there.cells] == [[], []]
    assert len(slurm_campaign.outcomes) == 2
    for outcome in slurm_campaign.outcomes:
        assert outcome.status == "FINISHED" and outcome.result is not None
        assert outcome.result.models == [] and outcome.result.final.metrics


def test_sbatch_script_for_a_dist_cell() -> None:
    block = SlurmBlock(partition="gpu-a100", time_min=90, gpus_per_node=4, account="proj7", setup=["module load cuda"])
    text = sbatch_script(block, _task("dist", world=4, cpus=8), folder="/scratch/jobs")
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    for flag in (
        "#SBATCH --partition=gpu-a100",
        "#SBATCH --time=90",
        "#SBATCH --gpus-per-node=4",
        "#SBATCH --cpus-per-task=8",
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --account=proj7",
        "#SBATCH --job-name=distrepro-arm-s0",
    ):
        assert flag in lines, flag
    torchrun = f"{shlex.quote(sys.executable)} -m torch.distributed.run --standalone --nnodes=1 --nproc-per-node=4"
    assert f"export DISTREPRO_TORCHRUN={shlex.quote(torchrun)}" in lines
    assert lines.index("module load cuda") < next(i for i, ln in enumerate(lines) if ln.startswith("srun "))
    srun = next(ln for ln in lines if ln.startswith("srun "))
    assert srun.endswith("-u -m submitit.core._submit /scratch/jobs/%j")


def test_sbatch_script_for_an_inprocess_cell_has_no_torchrun() -> None:
    text = sbatch_script(SlurmBlock(time_min=5), _task(cpus=2), folder="/scratch/jobs")
    assert "#SBATCH --cpus-per-task=2" in text.splitlines()
    assert "torch.distributed.run" not in text and "--partition" not in text and "--gpus-per-node" not in text


def test_flags_override_the_config_block(tmp_path: Path) -> None:
    config = write_config(tmp_path, name="blocky", slurm={"partition": "cpu", "time_min": 30, "array": True})
    cfg = load_config(config)
    assert "slurm" not in cfg.model_dump(mode="json")  # where a cell runs is not what it computes: not logged
    spec = ExecutorSpec("slurm", slurm={"time_min": 45, "partition": None}, slurm_cluster="local")
    ex = make_executor(spec, [cfg])
    assert isinstance(ex, SlurmExecutor)
    params = job_parameters(ex.blocks["blocky"], _task())
    assert params["slurm_partition"] == "cpu" and params["timeout_min"] == 45 and ex.blocks["blocky"].array


@pytest.mark.slow
@pytest.mark.distributed
def test_a_dist_cell_is_one_job_with_torchrun_inside(tmp_path: Path, mlflow_uri: str, profiles: Path) -> None:
    cfg = load_config(write_config(tmp_path, name="distjob", profile="pair-2", engine="dist", seeds=[0]))
    block = SlurmBlock(folder=str(tmp_path / "jobs"), time_min=10)
    here = run_campaign(cfg, show_progress=False)
    there = run_on(SlurmExecutor(block, cluster="local"), cfg)
    assert campaign_metrics(mlflow_uri, there.parent_run_id) == campaign_metrics(mlflow_uri, here.parent_run_id)
    assert children(mlflow_uri, there.parent_run_id)[0].info.status == "FINISHED"
    logs = "".join(p.read_text() for p in (tmp_path / "jobs").glob("*/*_log.err"))
    assert "starting the ranks with DISTREPRO_TORCHRUN:" in logs and "--nproc-per-node=2" in logs
