"""What ``distrepro ui`` does to a store before it prints the addresses: the views brought up to date, and the arms
and seeds of an exploratory reproduction logged by an older distrepro (which tagged only its umbrella run) tagged
too, so that the confirmatory view leaves them out."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from hang_guard import hang_guard

from distrepro.tracking.mlflow_client import REPRODUCTION_TAG, ensure_experiment, make_client
from distrepro.tracking.ui_server import addresses
from distrepro.tracking.ui_view import CONFIRMATORY_FILTER, EXPLORATORY_TAG, VIEW_TAG, view_state


def _reproduction(client, exp: str, exploratory: bool) -> list[str]:
    """An umbrella run, one arm and two seeds, as an older distrepro logged them: only the umbrella tagged."""
    tags = {"distrepro.reproduce": "proxy", **({EXPLORATORY_TAG: "true"} if exploratory else {})}
    umbrella = client.create_run(exp, run_name="reproduce p (proxy)", tags=tags).info.run_id
    arm = client.create_run(exp, run_name="sync", tags={REPRODUCTION_TAG: umbrella}).info.run_id
    seeds = [client.create_run(exp, run_name=f"sync/s{s}", tags={"mlflow.parentRunId": arm}) for s in (0, 1)]
    return [umbrella, arm, *(s.info.run_id for s in seeds)]


@pytest.mark.smoke
def test_an_older_exploratory_reproduction_is_tagged_whole(mlflow_uri: str) -> None:
    client = make_client(mlflow_uri)
    exp = ensure_experiment(client, "distrepro/p")
    client.set_experiment_tag(exp, VIEW_TAG, "{}")  # an older view
    registered = _reproduction(client, exp, exploratory=False)
    explored = _reproduction(client, exp, exploratory=True)
    (found,) = addresses(client, "http://h:1")
    assert found.experiment == "distrepro/p" and found.exploratory is not None
    assert client.get_experiment(exp).tags[VIEW_TAG] == view_state()
    assert sorted(r.info.run_id for r in client.search_runs([exp], CONFIRMATORY_FILTER)) == sorted(registered)
    assert all(client.get_run(r).data.tags.get(EXPLORATORY_TAG) == "true" for r in explored)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _stat(pid: int) -> tuple[int, int]:
    """A process's parent and session (-1, -1 once it is gone); zombies count as gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return -1, -1
    return (-1, -1) if fields[0] == "Z" else (int(fields[1]), int(fields[3]))


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


@pytest.mark.slow  # an MLflow server's start: 5 s of CPU idle, a minute loaded
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the death signal is Linux's")
def test_a_killed_ui_takes_its_server_with_it(tmp_path: Path, migrated_mlflow_db: Path) -> None:
    """``kill -9`` of ``distrepro ui`` runs none of its clean-up; its server must still end and free the port."""
    db = tmp_path / "mlflow.db"
    shutil.copyfile(migrated_mlflow_db, db)
    port = _free_port()
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{db}", "MLFLOW_DISABLE_TELEMETRY": "true"}
    ui = subprocess.Popen(
        [sys.executable, "-m", "distrepro.cli", "ui", "--port", str(port)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + hang_guard(240)
        while not _answers(port):
            assert ui.poll() is None and time.monotonic() < deadline, ui.stdout.read() if ui.stdout else ""
            time.sleep(0.5)
        (guardian,) = [pid for pid in _pids() if _stat(pid)[0] == ui.pid]  # the server's session leader
        assert len([pid for pid in _pids() if _stat(pid)[1] == guardian]) >= 2  # it and the server at least
        ui.kill()
        ui.wait()
        deadline = time.monotonic() + hang_guard(60)
        while [pid for pid in _pids() if _stat(pid)[1] == guardian] and time.monotonic() < deadline:
            time.sleep(0.5)
        left = [pid for pid in _pids() if _stat(pid)[1] == guardian]
        assert not left and not _answers(port), f"the MLflow server outlived a killed `distrepro ui`: {left}"
    finally:
        if ui.poll() is None:
            ui.kill()
