"""``--executor ray`` on a real local Ray cluster (one per module: it takes seconds to start): the same runs as
one process, a cell whose worker is killed is FAILED and ``--resume`` runs it again; a remote cluster refuses a
tracking store that its nodes cannot reach, in one line."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cellruns import (
    campaign_metrics,
    children,
    kill_running_cell,
    run_on,
    session_processes,
    start_interruptible,
    wait_for_line,
)
from clirun import cli_env, run_cli, write_config
from hang_guard import hang_guard

from distrepro.config.run_config import load_config
from distrepro.orchestration.campaign import run_campaign
from distrepro.orchestration.executors.cell_task import FAILURE_TAG
from distrepro.tracking.mlflow_client import make_client

ray = pytest.importorskip("ray")

from distrepro.orchestration.executors.ray_executor import RayExecutor, local_temp_dir  # noqa: E402


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=local_temp_dir())
    yield
    ray.shutdown()


def test_ray_campaign_equals_one_process(
    ray_cluster: None, tmp_path: Path, mlflow_uri: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = load_config(write_config(tmp_path, name="rayed", seeds=[0, 1]))
    here = run_campaign(cfg, show_progress=False)
    there = run_on(RayExecutor(), cfg)
    assert campaign_metrics(mlflow_uri, there.parent_run_id) == campaign_metrics(mlflow_uri, here.parent_run_id)
    runs = children(mlflow_uri, there.parent_run_id)
    assert {r.info.status for r in runs.values()} == {"FINISHED"}
    assert all("(ray)" in r.data.tags["distrepro.worker"] for r in runs.values())
    assert ray.is_initialized()  # a Ray session it did not start is left running
    err = capsys.readouterr().err
    assert "rayed · seed 0: running]" in err or "rayed · seed 1: running]" in err  # cells say when they start
    assert "0 queued · 0 running · 2 done · 0 failed" in err


class _Keeping(RayExecutor):
    """The Ray executor, keeping the outcomes its run returns (the campaign reads only their metrics)."""

    def __init__(self) -> None:
        super().__init__()
        self.outcomes: list[Any] = []

    def run(self, tasks: list[Any], events: Any) -> list[Any]:
        self.outcomes = super().run(tasks, events)
        return self.outcomes


def test_ray_tasks_return_no_trained_models(ray_cluster: None, tmp_path: Path, mlflow_uri: str) -> None:
    """A ResNet-50 would be 100 MB pickled back per cell: the outcome carries the metrics, the run the rest."""
    executor = _Keeping()
    result = run_on(executor, load_config(write_config(tmp_path, name="raymodels", seeds=[0])))
    assert [c.result.models for c in result.cells] == [[]]
    (outcome,) = executor.outcomes
    assert outcome.status == "FINISHED" and outcome.result is not None
    assert outcome.result.models == [] and outcome.result.final.metrics  # the metrics came back, the models not


def test_killed_ray_task_is_failed_then_resumed(ray_cluster: None, tmp_path: Path, mlflow_uri: str) -> None:
    cfg = load_config(write_config(tmp_path, name="raykill", seeds=[0, 1], budget={"steps": 400}))
    box: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: box.update(result=run_on(RayExecutor(), cfg)))
    thread.start()
    killed, _ = kill_running_cell(mlflow_uri, "distrepro/adhoc")
    thread.join(timeout=hang_guard(600))
    result = box["result"]
    client = make_client(mlflow_uri)
    assert client.get_run(result.parent_run_id).info.status == "FAILED"
    dead = client.get_run(killed)
    assert dead.info.status == "FAILED"
    assert dead.data.tags[FAILURE_TAG].startswith("Ray WorkerCrashedError")
    assert len(result.cells) == 1  # the other cell finished
    again = run_on(RayExecutor(), cfg, result.parent_run_id)
    assert [c.seed for c in again.cells] == [int(dead.data.tags["distrepro.seed"])]
    assert client.get_run(result.parent_run_id).info.status == "FINISHED"


def test_remote_cluster_refuses_a_local_store(tmp_path: Path, mlflow_uri: str) -> None:
    config = write_config(tmp_path, name="remote")
    done = run_cli(["run", str(config), "--executor", "ray", "--ray-address", "10.0.0.1:6379"], mlflow_uri, tmp_path)
    assert done.rc == 2
    assert len(done.error_lines) == 1 and "is a local file; start a tracking server" in done.error_lines[0]
    assert not any("10.0.0.1" in line for line in done.err_lines if line not in done.error_lines)  # never dialled


def _interrupt_ray_run(tmp_path: Path, mlflow_uri: str, name: str, after: str) -> tuple[int, str, list[Any]]:
    """``distrepro run --executor ray`` (a Ray it starts itself: a fresh CLI process, no session of the test's),
    Ctrl-C'd to its whole session as a terminal does once a stderr line contains ``after``; its exit status,
    stderr and child runs, after checking that no process it started is left."""
    config = write_config(tmp_path, name=name, seeds=[0, 1, 2, 3], budget={"steps": 300})
    proc = start_interruptible(config, tmp_path, cli_env(mlflow_uri), "--executor", "ray")
    try:
        seen = wait_for_line(proc, after)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=hang_guard(120))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert session_processes(proc.pid) == []
    client = make_client(mlflow_uri)
    exp = client.get_experiment_by_name("distrepro/adhoc")
    cells = [r for r in client.search_runs([exp.experiment_id]) if "mlflow.parentRunId" in r.data.tags]
    return proc.returncode, "".join(seen) + err, cells


def _says_how_to_resume(err: str, cells: list[Any]) -> None:
    parents = {r.data.tags["mlflow.parentRunId"] for r in cells}
    assert len(parents) == 1, parents
    last = err.strip().splitlines()[-1]
    assert last.startswith("distrepro: interrupted (Ctrl-C); campaign run "), err[-2000:]
    assert last.endswith(f"--executor ray --no-progress --resume {parents.pop()}"), last


@pytest.mark.slow
@pytest.mark.timeout(600)  # a Ray of its own starts in 10 to 40 s on a loaded two-core machine
def test_ctrl_c_cancels_ray_tasks_keeps_finished_cells_and_leaves_no_process(tmp_path: Path, mlflow_uri: str) -> None:
    rc, err, cells = _interrupt_ray_run(tmp_path, mlflow_uri, "raystop", ": done in")
    assert rc == 130, err[-2000:]
    assert "Traceback" not in err, err[-3000:]
    _says_how_to_resume(err, cells)
    finished = {r.data.tags["distrepro.seed"] for r in cells if r.info.status == "FINISHED"}
    done = {line.split("seed ")[1].split(":")[0] for line in err.splitlines() if ": done in" in line}
    assert done and done <= finished  # a cell that finished before Ctrl-C stays FINISHED
    assert len(cells) == 4 and {r.info.status for r in cells} == {"KILLED", "FINISHED"}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_ctrl_c_while_ray_starts_exits_130_without_a_crash(tmp_path: Path, mlflow_uri: str) -> None:
    """Ray logs that it started just before the driver builds its core worker: a Ctrl-C cutting that short left a
    half-made driver whose interpreter died of a segmentation fault (status -11) after printing the hint."""
    rc, err, cells = _interrupt_ray_run(tmp_path, mlflow_uri, "raystart", "Started a local Ray instance")
    assert rc == 130, err[-2000:]
    assert "Traceback" not in err, err[-3000:]
    _says_how_to_resume(err, cells)
    assert {r.info.status for r in cells} <= {"KILLED", "FINISHED"}
