"""``--executor local --jobs N``: cells in worker processes give the same runs as one process, and a worker
that dies costs only its cell (FAILED, with why), which ``--resume`` then runs again."""

from __future__ import annotations

import multiprocessing.forkserver
import os
import re
import resource
import signal
import threading
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
from clirun import cli_env, write_config
from hang_guard import hang_guard

from distrepro.config.run_config import load_config
from distrepro.orchestration.campaign import run_campaign
from distrepro.orchestration.executors import selection
from distrepro.orchestration.executors.cell_task import FAILURE_TAG
from distrepro.orchestration.executors.local_pool import LocalExecutor
from distrepro.orchestration.executors.selection import ExecutorSpec, default_jobs, make_executor
from distrepro.tracking.mlflow_client import make_client


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def test_jobs2_equals_jobs1_run_by_run(tmp_path: Path, mlflow_uri: str) -> None:
    cfg = load_config(write_config(tmp_path, name="pool", seeds=[0, 1, 2]))
    one = run_campaign(cfg, show_progress=False)
    before = _children_cpu()
    two = run_on(LocalExecutor(jobs=2, threads=1), cfg)
    # the fork server ended with the pool and was waited for: its CPU and its workers' (torch imported, three cells
    # trained) count as this process's children's, as /usr/bin/time and the benchmarks read them
    assert multiprocessing.forkserver._forkserver._forkserver_pid is None  # type: ignore[attr-defined]
    assert _children_cpu() - before > 1.0
    assert [c.seed for c in two.cells] == [0, 1, 2]
    first, second = campaign_metrics(mlflow_uri, one.parent_run_id), campaign_metrics(mlflow_uri, two.parent_run_id)
    assert sorted(second) == [0, 1, 2]
    for seed in first:
        assert first[seed].keys() == second[seed].keys()
        assert "val_loss" in first[seed] and len(first[seed]["val_loss"]) >= 2
        assert first[seed] == second[seed], f"seed {seed}: the pool changed what the cell logged"
    runs = children(mlflow_uri, two.parent_run_id)
    assert {r.info.status for r in runs.values()} == {"FINISHED"}
    assert all("local" in r.data.tags["distrepro.worker"] for r in runs.values())
    one_run, two_run = children(mlflow_uri, one.parent_run_id)[0], runs[0]
    assert one_run.data.params == two_run.data.params
    assert make_client(mlflow_uri).get_run(two.parent_run_id).info.status == "FINISHED"


def test_default_jobs_fit_the_cores_to_the_cells_threads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one_thread = load_config(write_config(tmp_path, name="t1", torch_threads=1))
    unset = load_config(write_config(tmp_path, name="t0", torch_threads=None, seeds=[0, 1]))
    cores = len(os.sched_getaffinity(0))
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("SLURM_CPUS_PER_TASK", raising=False)
    assert default_jobs([one_thread]) == cores
    assert default_jobs([unset]) == cores  # unset: a cell per core (one alone still gets every core)
    monkeypatch.setenv("OMP_NUM_THREADS", str(cores))  # the user's word: that many threads a cell
    assert default_jobs([unset]) == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert default_jobs([unset, load_config(write_config(tmp_path, name="t2", torch_threads=cores))]) == 1
    assert make_executor(ExecutorSpec("local", jobs=1), [one_thread]) is None  # the classic in-process path
    pool = make_executor(ExecutorSpec("local", jobs=2), [unset])
    assert isinstance(pool, LocalExecutor) and pool.jobs == 2 and pool.threads == 1  # OMP_NUM_THREADS=1 holds
    monkeypatch.delenv("OMP_NUM_THREADS")
    pool = make_executor(ExecutorSpec("local", jobs=2), [unset])
    assert isinstance(pool, LocalExecutor) and pool.threads == max(1, cores // 2)


def _campaign_in_thread(cfg: Any, executor: Any) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = run_on(executor, cfg)
        except BaseException as exc:  # the test thread reports it
            box["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    return thread, box


def test_a_killed_worker_fails_its_cell_only_and_resume_reruns_it(tmp_path: Path, mlflow_uri: str) -> None:
    cfg = load_config(write_config(tmp_path, name="doomed", seeds=[0, 1], budget={"steps": 200}))
    thread, box = _campaign_in_thread(cfg, LocalExecutor(jobs=2, threads=1))
    killed, pid = kill_running_cell(mlflow_uri, "distrepro/adhoc")
    thread.join(timeout=hang_guard(600))
    assert "error" not in box, box.get("error")
    result = box["result"]
    client = make_client(mlflow_uri)
    assert client.get_run(result.parent_run_id).info.status == "FAILED"
    runs = children(mlflow_uri, result.parent_run_id)
    dead = next(r for r in runs.values() if r.info.run_id == killed)
    assert dead.info.status == "FAILED"
    assert f"worker process {pid} died (signal 9)" in dead.data.tags[FAILURE_TAG]
    survivor = next(r for r in runs.values() if r.info.run_id != killed)
    assert survivor.info.status == "FINISHED" and [c.seed for c in result.cells] == [
        int(survivor.data.tags["distrepro.seed"])
    ]

    again = run_on(LocalExecutor(2, 1), cfg, result.parent_run_id)
    assert again.parent_run_id == result.parent_run_id
    assert [c.seed for c in again.cells] == [int(dead.data.tags["distrepro.seed"])]  # only the failed cell ran again
    assert client.get_run(result.parent_run_id).info.status == "FINISHED"
    rerun = children(mlflow_uri, result.parent_run_id)[int(dead.data.tags["distrepro.seed"])]
    assert rerun.info.status == "FINISHED" and rerun.data.tags["distrepro.resumes"] == killed


@pytest.mark.parametrize("after", [": running]", ": done in"])
def test_ctrl_c_cancels_the_cells_and_leaves_no_process(tmp_path: Path, mlflow_uri: str, after: str) -> None:
    """Ctrl-C once a cell runs, or once one has finished: exit 130, the one interrupt line (no worker's traceback),
    no process left, the unfinished cells KILLED and a cell that had said "done" still FINISHED."""
    config = write_config(tmp_path, name="stopped", seeds=[0, 1, 2], budget={"steps": 200})
    proc = start_interruptible(config, tmp_path, cli_env(mlflow_uri), "--jobs", "2")
    try:
        before = wait_for_line(proc, after)  # the campaign says when a cell starts and when it is done
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole foreground group
        _, err = proc.communicate(timeout=hang_guard(120))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    err = "".join(before) + err
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    assert "distrepro: interrupted (Ctrl-C)" in err and "--resume" in err, err[-2000:]
    assert session_processes(proc.pid) == []
    client = make_client(mlflow_uri)
    exp = client.get_experiment_by_name("distrepro/adhoc")
    runs = client.search_runs([exp.experiment_id])
    parent = next(r for r in runs if "mlflow.parentRunId" not in r.data.tags)
    assert parent.info.status == "KILLED"
    cells = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(cells) == 3 and {r.info.status for r in cells} <= {"KILLED", "FINISHED"}
    assert "KILLED" in {r.info.status for r in cells}
    said_done = {int(s) for s in re.findall(r"seed (\d+): done in", err)}
    status = {int(r.data.tags["distrepro.seed"]): r.info.status for r in cells}
    assert all(status[seed] == "FINISHED" for seed in said_done), (said_done, status)
    assert (after == ": done in") <= bool(said_done)


@pytest.mark.parametrize(
    ("flags", "error"),
    [
        (["--jobs", "0"], "--jobs: needs at least 1 job, got 0"),
        (["--executor", "ray", "--jobs", "2"], "--jobs: applies to --executor local"),
        (["--slurm-partition", "gpu"], "--slurm-partition: applies to --executor slurm, not --executor local"),
        (["--ray-address", "h:6379"], "--ray-address: applies to --executor ray, not --executor local"),
    ],
)
def test_executor_flags_that_do_not_fit_are_one_line(
    tmp_path: Path, mlflow_uri: str, flags: list[str], error: str
) -> None:
    from distrepro.cli import build_parser
    from distrepro.cli.executor_flags import executor_spec
    from distrepro.errors import ConfigError

    args = build_parser().parse_args(["run", "x.yaml", *flags])
    with pytest.raises(ConfigError, match=error.replace("-", "\\-")):
        executor_spec(args)


def test_jobs_are_capped_at_the_cells_and_more_than_the_cores_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The census's case: ``--jobs 1000`` for 2 cells started 1,000 workers importing torch, and said nothing."""
    cfg = load_config(write_config(tmp_path, name="capped", seeds=[0, 1]))
    pool = make_executor(ExecutorSpec("local", jobs=1000), [cfg])
    assert isinstance(pool, LocalExecutor) and pool.jobs == min(2, selection.cores())
    assert make_executor(ExecutorSpec("local", jobs=1000), [load_config(write_config(tmp_path, name="one"))]) is None


@pytest.mark.parametrize(("cores", "free_gib", "cap"), [(4, 100.0, 4), (64, 2.0, 3)])
def test_jobs_1000_with_1000_seeds_are_capped_by_cores_and_memory_in_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    cores: int,
    free_gib: float,
    cap: int,
) -> None:
    """``--jobs 1000`` with 1,000 seeds would start 1,000 workers: the pool gets no more than the cores, nor more
    than the memory holds at about 0.6 GiB a worker, and the line says so (nothing is started here)."""
    from distrepro.orchestration import machine_memory

    monkeypatch.setattr(selection, "cores", lambda: cores)
    monkeypatch.setattr(machine_memory, "available_bytes", lambda: int(free_gib * 2**30))
    cfg = load_config(write_config(tmp_path, name="many", seeds=list(range(1000))))
    pool = make_executor(ExecutorSpec("local", jobs=1000), [cfg])
    assert isinstance(pool, LocalExecutor) and pool.jobs == cap and pool._workers == []
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"distrepro: --jobs 1000 capped to {cap} worker(s)"), lines
    assert f"{cores} core(s)" in lines[0] and f"{free_gib:.1f} GiB of memory available" in lines[0], lines


def test_distrepro_jobs_sets_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = load_config(write_config(tmp_path, name="envjobs", seeds=[0, 1, 2]))
    monkeypatch.setattr(selection, "cores", lambda: 8)  # a cap at the cores would hide the variable's effect
    monkeypatch.setenv("DISTREPRO_JOBS", "3")
    pool = make_executor(ExecutorSpec("local"), [cfg])
    assert isinstance(pool, LocalExecutor) and pool.jobs == 3
    monkeypatch.setenv("DISTREPRO_JOBS", "1")
    assert make_executor(ExecutorSpec("local"), [cfg]) is None
    assert isinstance(make_executor(ExecutorSpec("local", jobs=2), [cfg]), LocalExecutor)  # the flag wins
