"""Campaigns handed to an executor together (``reproduce``'s arms): every arm's run and every cell's run is created
before the first cell trains, yet each shows its own Duration in MLflow's runs table: a cell's run starts when a
worker takes it, an arm's when its first cell started, and it ends when its last cell ended."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from clirun import write_config
from slow_step import Stopped, alive_lines, captured_stderr, slow_step

from distrepro.config.run_config import load_config
from distrepro.orchestration.executors.dispatch import CampaignRequest, run_campaigns
from distrepro.orchestration.executors.local_pool import LocalExecutor
from distrepro.tracking.mlflow_client import make_client


def test_arms_on_one_serial_executor_start_when_their_first_cell_did(tmp_path: Path, mlflow_uri: str) -> None:
    arms = [load_config(write_config(tmp_path, name=name, seeds=[0, 1])) for name in ("first", "second")]
    results = run_campaigns([CampaignRequest(cfg) for cfg in arms], LocalExecutor(jobs=1, threads=1), False)
    client = make_client(mlflow_uri)
    runs = [client.get_run(r.parent_run_id).info for r in results]
    cells = [sorted((client.get_run(c.run_id).info for c in r.cells), key=lambda i: i.start_time) for r in results]
    for arm, its in zip(runs, cells, strict=True):
        assert [c.status for c in its] == ["FINISHED", "FINISHED"]
        assert arm.start_time == its[0].start_time  # its first cell's start, not when its run was created
        assert arm.end_time == max(c.end_time for c in its)
    assert cells[0][1].start_time >= cells[0][0].end_time  # one cell at a time: a queued cell's wait is not its own
    assert runs[1].start_time >= max(c.end_time for c in cells[0])  # the second arm began once the first was done


class _SlowExecutor:
    """An executor whose cells never finish until the heartbeat has repeated the cell counts."""

    name = "slow"
    remote = False
    jobs = 2

    def __init__(self, run: Any) -> None:
        self.run = run

    def describe(self) -> str:
        return "a slow test executor"


def test_preparing_the_campaigns_then_long_cells_are_named_while_they_last(
    tmp_path: Path, mlflow_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fake slow steps: building two campaigns' datasets and jobs, then cells that finish nothing for a while."""
    import distrepro.orchestration.executors.dispatch as dispatch

    arms = [load_config(write_config(tmp_path, name=name, seeds=[0])) for name in ("first", "second")]
    out = captured_stderr(monkeypatch)
    building = "distrepro: building the datasets and jobs: 0 of 2 campaigns done"
    real_prepare = dispatch.prepare_campaign
    monkeypatch.setattr(dispatch, "prepare_campaign", slow_step(out, building))
    with pytest.raises(Stopped, match="seen"):
        run_campaigns([CampaignRequest(cfg) for cfg in arms], _SlowExecutor(None), False)
    monkeypatch.setattr(dispatch, "prepare_campaign", real_prepare)
    with pytest.raises(Stopped, match="seen"):  # the cells' counts, every beat, while none finishes
        run_campaigns([CampaignRequest(cfg) for cfg in arms], _SlowExecutor(slow_step(out, "] cells: 2 queued")), False)
    assert any(building in line for line in alive_lines(out))
    assert any("] cells: 2 queued · 0 running · 0 done · 0 failed · " in line for line in alive_lines(out))
