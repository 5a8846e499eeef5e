"""``--system-metrics``: MLflow's CPU/memory/disk/network series in each seed's run, or one clear line."""

from __future__ import annotations

import importlib.util
from pathlib import Path

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
