"""``--system-metrics``: MLflow's CPU/memory/disk/network series in each seed's run, or one clear line."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from clirun import write_config

from distrepro.cli import main
from distrepro.errors import DistreproError
from distrepro.tracking.mlflow_client import make_client
from distrepro.tracking.runlog import check_system_metrics


def test_without_psutil_the_flag_is_one_line_before_any_work(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, mlflow_uri: str, capsys: pytest.CaptureFixture[str]
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "psutil" else real(name, *a))
    with pytest.raises(DistreproError, match="psutil"):
        check_system_metrics()
    assert main(["run", str(write_config(tmp_path)), "--system-metrics", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--system-metrics needs psutil" in err[0]


@pytest.mark.skipif(importlib.util.find_spec("psutil") is None, reason="psutil not installed")
def test_each_seed_run_gets_system_metrics(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, mlflow_uri: str, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL", "0.01")  # a 6-step run lasts well under a second
    config = write_config(tmp_path, budget={"steps": 6}, seeds=[0, 1])
    assert main(["run", str(config), "--system-metrics", "--no-progress"]) == 0
    client = make_client(mlflow_uri)
    exp = client.get_experiment_by_name("distrepro/adhoc")
    seeds = [r for r in client.search_runs([exp.experiment_id]) if "mlflow.parentRunId" in r.data.tags]
    assert len(seeds) == 2
    for run in seeds:
        assert any(k.startswith("system/cpu_utilization") for k in run.data.metrics), sorted(run.data.metrics)
        assert run.info.status == "FINISHED"


@pytest.mark.skipif(importlib.util.find_spec("psutil") is None, reason="psutil not installed")
def test_jobs2_workers_sample_system_metrics_in_their_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, mlflow_uri: str
) -> None:
    """``--jobs 2``: the flag reaches the pool, and each worker samples while its cell trains (not the campaign's
    process, whose handles on the queued runs would log the load before the cell started)."""
    import os

    monkeypatch.setenv("MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL", "0.01")  # spawned workers inherit it
    config = write_config(tmp_path, budget={"steps": 6}, seeds=[0, 1], torch_threads=1)
    assert main(["run", str(config), "--system-metrics", "--no-progress", "--jobs", "2"]) == 0
    client = make_client(mlflow_uri)
    exp = client.get_experiment_by_name("distrepro/adhoc")
    runs = client.search_runs([exp.experiment_id])
    seeds = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(seeds) == 2
    for run in seeds:
        assert any(k.startswith("system/cpu_utilization") for k in run.data.metrics), sorted(run.data.metrics)
        assert run.info.status == "FINISHED"
        where = run.data.tags["distrepro.worker"]
        assert "(local)" in where and int(where.split(":")[1].split()[0]) != os.getpid()  # a pool worker's
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert not any(k.startswith("system/") for k in parent.data.metrics)


def test_every_executor_gets_the_flag_in_its_tasks_and_a_worker_without_psutil_fails_only_its_cell(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, mlflow_uri: str
) -> None:
    """Ray and SLURM run the same :class:`CellTask` (pickled): the flag travels in it. A worker that cannot sample
    (no psutil there) fails its cell FAILED with the reason; the campaign is FAILED (it names the seed to resume)."""
    from distrepro.config.run_config import load_config
    from distrepro.orchestration.executors import cell_task
    from distrepro.orchestration.executors.dispatch import CampaignRequest, run_campaigns
    from distrepro.orchestration.executors.local_pool import LocalExecutor
    from distrepro.tracking import runlog

    seen: list[bool] = []

    class Recording(LocalExecutor):  # jobs=1 runs run_cell_task here, as a Ray task or SLURM job would there
        def run(self, tasks: Any, events: Any) -> Any:
            seen.extend(t.system_metrics for t in tasks)
            return super().run(tasks, events)

    def no_psutil_on_the_worker(run_id: str, options: Any) -> Any:  # this process has it: the check above passes
        raise DistreproError("--system-metrics needs psutil: pip install 'distrepro[system-metrics]' (or psutil)")

    monkeypatch.setattr(runlog, "start_system_metrics", no_psutil_on_the_worker)
    cfg = load_config(write_config(tmp_path, budget={"steps": 2}, seeds=[0]))
    (result,) = run_campaigns([CampaignRequest(cfg, system_metrics=True)], Recording(jobs=1, threads=1), False)
    assert seen == [True]
    assert result.cells == []
    client = make_client(mlflow_uri)
    (child,) = client.search_runs(
        [result.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{result.parent_run_id}'"
    )
    assert child.info.status == "FAILED" and "psutil" in child.data.tags[cell_task.FAILURE_TAG]
    assert client.get_run(result.parent_run_id).info.status == "FAILED"


@pytest.mark.skipif(importlib.util.find_spec("psutil") is None, reason="psutil not installed")
def test_a_slurm_job_samples_its_cell(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, mlflow_uri: str) -> None:
    """The SLURM path end to end (submitit's local cluster runs the very pickled job a cluster gets)."""
    pytest.importorskip("submitit")
    from distrepro.config.run_config import load_config
    from distrepro.config.slurm_block import SlurmBlock
    from distrepro.orchestration.executors.dispatch import CampaignRequest, run_campaigns
    from distrepro.orchestration.executors.slurm_executor import SlurmExecutor

    monkeypatch.setenv("MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL", "0.01")  # the job inherits the environment
    cfg = load_config(write_config(tmp_path, budget={"steps": 4}, seeds=[0]))
    executor = SlurmExecutor(SlurmBlock(folder=str(tmp_path / "jobs"), time_min=10), cluster="local")
    (result,) = run_campaigns([CampaignRequest(cfg, system_metrics=True)], executor, False)
    run = make_client(mlflow_uri).get_run(result.cells[0].run_id)
    assert "(slurm)" in run.data.tags["distrepro.worker"] and run.info.status == "FINISHED"
    assert any(k.startswith("system/cpu_utilization") for k in run.data.metrics), sorted(run.data.metrics)
