"""``run`` and ``reproduce`` train in a child the command watches: a child that vanishes still has its runs closed
FAILED and its end said (the in-process engine's ``os._exit(0)`` exited 0 in silence and left the campaign RUNNING)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import hostile_cases
import mlflow
import pytest
from clirun import cli_env
from hang_guard import hang_guard

from distrepro.cli.watch import SWITCH_ENV, WATCHER_ENV, wants_watch
from distrepro.orchestration.executors.cell_task import FAILURE_TAG
from distrepro.tracking.campaign_lock import LOCK_TAG
from distrepro.tracking.open_runs import read_notes


@pytest.mark.smoke
def test_the_notes_give_the_runs_left_open_and_whether_main_returned(tmp_path: Path) -> None:
    notes = tmp_path / "notes.jsonl"
    lines = [
        {"open": "u", "uri": "sqlite:///x.db", "kind": "reproduction run", "pid": 7},
        {"open": "a", "uri": "sqlite:///x.db", "kind": "campaign run", "pid": 7},
        {"closed": "a"},
        {"open": "b", "uri": "sqlite:///x.db", "kind": "campaign run", "pid": 7},
    ]
    notes.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"open": "cut sh', encoding="utf-8")
    found = read_notes(notes)
    assert [(r.run_id, r.kind) for r in found.open] == [("u", "reproduction run"), ("b", "campaign run")]
    assert found.exit is None
    with notes.open("a") as f:
        f.write('\n{"exit": 2}\n')
    assert read_notes(notes).exit == 2


@pytest.mark.smoke
def test_only_commands_that_train_are_watched_and_never_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WATCHER_ENV, raising=False)
    monkeypatch.delenv(SWITCH_ENV, raising=False)
    assert wants_watch("run") and wants_watch("reproduce")
    assert not wants_watch("list") and not wants_watch("report")
    monkeypatch.setenv(SWITCH_ENV, "0")
    assert not wants_watch("run")
    monkeypatch.delenv(SWITCH_ENV)
    monkeypatch.setenv(WATCHER_ENV, "1")  # inside a watched child
    assert not wants_watch("run")


def _all_runs(db: Path) -> list[Any]:
    client = mlflow.MlflowClient(f"sqlite:///{db}")
    return [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]


def _command(tmp_path: Path, migrated_mlflow_db: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    paths = hostile_cases.write_inputs(tmp_path / "inputs")
    db = tmp_path / "mlflow.db"
    shutil.copyfile(migrated_mlflow_db, db)
    argv = ["run", str(paths["tiny"]), "--no-progress", "--root", str(paths["root"]), "--jobs", "1", *extra]
    env = {k: v for k, v in cli_env(f"sqlite:///{db}").items() if k not in (WATCHER_ENV, SWITCH_ENV)}
    done = subprocess.run(
        [sys.executable, "-m", "distrepro.cli", *argv],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=hang_guard(240),
    )
    return done, db


def test_os_exit_in_the_inprocess_engine_fails_the_command_and_its_runs(
    tmp_path: Path, migrated_mlflow_db: Path
) -> None:
    """``os._exit(0)`` in ``train_step`` under ``--jobs 1``: the command fails (1), one line names the exit, the
    campaign and its seed run are FAILED with the reason, and the lock is released for ``--resume``."""
    done, db = _command(tmp_path, migrated_mlflow_db, "--set", "method=vanishing")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("distrepro: error: ")]
    assert len(errors) == 1, done.stderr
    assert "ended without finishing (exit code 0" in errors[0] and "marked FAILED" in errors[0], errors
    runs = _all_runs(db)
    assert len(runs) == 2 and {r.info.status for r in runs} == {"FAILED"}, [r.info.status for r in runs]
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    (cell,) = [r for r in runs if r is not parent]
    assert "worker exited without finishing" in cell.data.tags[FAILURE_TAG], cell.data.tags
    assert f"--resume {parent.info.run_id}" in errors[0] and cell.info.run_id in errors[0]
    assert json.loads(parent.data.tags[LOCK_TAG])["released"] is True


def test_a_kill_by_the_kernel_is_named_and_fails_the_runs(
    tmp_path: Path, migrated_mlflow_db: Path, with_test_plugins: Any
) -> None:
    """The test plugin ``faulty`` kills its own process (SIGKILL, as the out-of-memory killer would)."""
    with_test_plugins("faulty")
    done, db = _command(
        tmp_path, migrated_mlflow_db, "--set", "method=faulty", "--set", "method_params.fail_rank=0",
        "--set", "method_params.fail_step=1", "--set", "budget.steps=3",
    )  # fmt: skip
    assert done.returncode == 128 + signal.SIGKILL, done.stderr
    assert "killed by signal 9 (SIGKILL; out of memory?)" in done.stderr, done.stderr
    assert {r.info.status for r in _all_runs(db)} == {"FAILED"}


def test_the_child_dies_with_its_watcher(tmp_path: Path, migrated_mlflow_db: Path) -> None:
    """``kill -9`` of the command ends the work, as it did when the command was one process."""
    paths = hostile_cases.write_inputs(tmp_path)
    db = tmp_path / "mlflow.db"
    shutil.copyfile(migrated_mlflow_db, db)
    argv = ["run", str(paths["tiny"]), "--no-progress", "--root", str(paths["root"]), "--jobs", "1"]
    argv += ["--set", "method=blocking", "--set", "dist.timeout_s=600"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "distrepro.cli", *argv],
        cwd=tmp_path,
        env=cli_env(f"sqlite:///{db}"),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    child = None
    try:
        assert proc.stdout is not None
        assert "started" in proc.stdout.readline()  # the campaign is open: its lock names the child's pid
        (run,) = [r for r in _all_runs(db) if "mlflow.parentRunId" not in r.data.tags]
        child = json.loads(run.data.params["distrepro.lock.1"])["pid"]
        assert child != proc.pid
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + hang_guard(30)
        while _alive(child):
            assert time.monotonic() < deadline, f"the child {child} outlived its watcher"
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            proc.kill()
        if child is not None and _alive(child):
            os.kill(child, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (dead, not yet reaped by init) counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False
