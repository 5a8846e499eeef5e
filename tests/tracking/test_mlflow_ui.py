"""The MLflow UI opens a distrepro experiment on its runs table, not on MLflow 3's GenAI pages.

A real ``mlflow server`` serves a store holding one distrepro campaign; headless Chromium opens
the URL the CLI prints and must find the runs table (and not the empty "Traces" overview a user
landed on before). Skipped where Chromium is absent (CI installs it).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from mlflow_server import CHROMIUM, mlflow_server

from distrepro.tracking.mlflow_client import ensure_experiment, make_client
from distrepro.tracking.ui_view import EXPERIMENT_KIND_TAG, MODEL_TRAINING_KIND, ui_url


@pytest.mark.smoke
def test_new_experiments_are_marked_as_model_training(mlflow_uri: str) -> None:
    client = make_client(mlflow_uri)
    exp_id = ensure_experiment(client, "distrepro/ui-kind")
    assert client.get_experiment(exp_id).tags.get(EXPERIMENT_KIND_TAG) == MODEL_TRAINING_KIND


@pytest.mark.smoke
def test_an_experiment_made_before_the_kind_tag_gets_it(mlflow_uri: str) -> None:
    client = make_client(mlflow_uri)
    old = client.create_experiment("distrepro/old")
    assert EXPERIMENT_KIND_TAG not in client.get_experiment(old).tags
    assert ensure_experiment(client, "distrepro/old") == old
    assert client.get_experiment(old).tags.get(EXPERIMENT_KIND_TAG) == MODEL_TRAINING_KIND


def test_ui_url_selects_the_model_training_view() -> None:
    url = "http://h:1/#/experiments/7/runs?viewStateShareKey=distrepro&workflowType=machine_learning"
    assert ui_url("7", "http://h:1/") == url


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install -y chromium)")
def test_ui_opens_on_the_runs_of_a_distrepro_experiment(mlflow_uri: str, tmp_path: Path) -> None:
    client = make_client(mlflow_uri)
    exp_id = ensure_experiment(client, "distrepro/uitest")
    run = client.create_run(exp_id, run_name="campaign-for-the-ui")
    client.log_metric(run.info.run_id, "val_accuracy", 0.5)
    client.set_terminated(run.info.run_id)

    with mlflow_server(mlflow_uri, tmp_path) as base:
        browser = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'p'}"]
        browser += ["--virtual-time-budget=20000", "--window-size=1400,900"]
        dom = subprocess.run(
            [*browser, "--dump-dom", ui_url(exp_id, base)], capture_output=True, text=True, timeout=120, check=False
        ).stdout
        shot = tmp_path / "ui.png"
        subprocess.run([*browser, f"--screenshot={shot}", ui_url(exp_id, base)], capture_output=True, timeout=120)
    assert "campaign-for-the-ui" in dom, "the runs table does not list the campaign"
    assert "Run Name" in dom
    assert "Detect Issues" not in dom and "No data available for the selected time range" not in dom
    assert shot.is_file() and shot.stat().st_size > 10_000
