"""What the MLflow observer logs at each evaluation (distrepro/tracking/run_observer.py): the run's own series at
every evaluation, each rank's values at the final one only."""

from __future__ import annotations

from typing import Any

import pytest

from distrepro import metrics as M
from distrepro.job.results import EvalRecord, WorkerTotals
from distrepro.tracking.run_observer import MlflowObserver


class _Logger:
    def __init__(self) -> None:
        self.points: list[tuple[int, dict[str, float]]] = []

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        self.points.append((step, dict(metrics)))

    def log_emulated(self, metrics: dict[str, float], emulated_s: float) -> None:
        self.points.append((round(emulated_s * 1000), {M.emu(k): v for k, v in metrics.items()}))


def _record(step: int, final: bool) -> EvalRecord:
    workers = [WorkerTotals(r, 1.0 + r, 0.5, 0.25, 0.25, 100, 8, 4) for r in range(2)]
    records = {"h": 1.5, "h/rank0": 1.0, "h/rank1": 2.0, "my/rank2": 7.0}  # "my/rank2": a name the method chose
    return EvalRecord(step, step / 10, 8 * step, 0.1 * step, 0.0, {M.VAL_ACCURACY: 0.5}, workers, records, final)


@pytest.mark.smoke
def test_rank_values_are_logged_at_the_final_evaluation_only() -> None:
    logger = _Logger()
    observer = MlflowObserver(logger)
    for step, final in ((2, False), (4, False), (6, True)):
        observer.on_eval(_record(step, final))
    at_step = {step: keys for step, keys in logger.points[::2]}  # the global-step points, not the emu_ms ones
    ranked = {M.worker(r, f) for r in range(2) for f in M.WORKER_FIELDS} | {"method/h/rank0", "method/h/rank1"}
    for step in (2, 4):
        assert not ranked & set(at_step[step]), step
        assert {M.VAL_ACCURACY, M.BYTES_TOTAL, "method/h", "method/my/rank2"} <= set(at_step[step])
        assert at_step[step][M.BYTES_TOTAL] == 200.0  # the run's total still sums every worker's bytes
    assert ranked <= set(at_step[6])
    assert at_step[6][M.worker(1, "clock_s")] == 2.0 and at_step[6]["method/h/rank1"] == 2.0
    assert all(M.is_per_rank(k) for k in ranked) and not M.is_per_rank("method/h")


def test_a_small_run_logs_each_ranks_values_once(mlflow_uri: str) -> None:
    """A whole in-process run into MLflow: its curves have a point per evaluation, each per-rank key one point."""
    from distrepro.config.run_config import validate_config
    from distrepro.orchestration.campaign import run_campaign
    from distrepro.tracking.mlflow_client import make_client

    cfg = validate_config(
        {
            "method": "local_sgd",
            "profile": "homogeneous-4",
            "dataset": {"name": "synthetic", "params": {"train_size": 64, "test_size": 32, "image_size": 8}},
            "budget": {"steps": 4},
            "eval": {"times": 3},
            "seeds": [0],
            "torch_threads": 1,
        }
    )
    result: Any = run_campaign(cfg, show_progress=False, tracking_uri=mlflow_uri)
    client = make_client(mlflow_uri)
    run = client.get_run(result.cells[0].run_id)
    keys = set(run.data.metrics)
    ranked = {k for k in keys if M.is_per_rank(k)}
    assert {M.worker(r, "clock_s") for r in range(4)} | {f"method/sync_period/rank{r}" for r in range(4)} <= ranked
    curve = client.get_metric_history(run.info.run_id, M.VAL_ACCURACY)
    assert len(curve) >= 3
    last = max(p.step for p in curve)
    for key in ranked:
        assert [p.step for p in client.get_metric_history(run.info.run_id, key)] == [last], key
    assert len(client.get_metric_history(run.info.run_id, "method/sync_period")) == len(curve)
