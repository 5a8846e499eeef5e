"""A run whose loss went to NaN or infinity is tagged as diverged when it ends (the report names it from the tag)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from clirun import write_config

from distrepro.cli import main
from distrepro.job.results import EvalRecord, RunResult
from distrepro.orchestration.divergence import DIVERGED_TAG, divergence
from distrepro.tracking.mlflow_client import make_client


def _record(step: int, loss: float, final: bool = False) -> EvalRecord:
    return EvalRecord(step, 0.0, 0, 0.0, 0.0, {"val_loss": loss, "val_accuracy": 0.1}, [], final=final)


def _result(*losses: float) -> RunResult:
    evals = [_record(10 * i, loss, final=i == len(losses) - 1) for i, loss in enumerate(losses)]
    return RunResult(evals, evals[-1], [], [], 0.0, 0.0, None, None)


@pytest.mark.smoke
def test_the_first_evaluation_whose_loss_is_not_finite_is_named() -> None:
    assert divergence(_result(2.3, 1.9, 1.5)) is None
    assert divergence(_result(2.3, math.inf, math.nan)) == "val_loss inf at step 10"
    assert divergence(_result(2.3, math.nan)) == "val_loss nan at step 10"


def test_a_run_whose_loss_goes_to_nan_is_tagged_diverged(tmp_path: Path, mlflow_uri: str) -> None:
    config = write_config(tmp_path, name="diverges", budget={"steps": 4})
    assert main(["run", str(config), "--no-progress", "--set", "method_params.lr=1e30"]) == 0
    client = make_client(mlflow_uri)
    exp = client.get_experiment_by_name("distrepro/adhoc")
    (cell,) = [r for r in client.search_runs([exp.experiment_id]) if "mlflow.parentRunId" in r.data.tags]
    assert cell.data.tags[DIVERGED_TAG].startswith("val_loss nan at step "), cell.data.tags
