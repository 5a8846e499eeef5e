"""A campaign's preparation (its dataset built or read, its jobs resolved) names itself while it lasts."""

from __future__ import annotations

from pathlib import Path

import pytest
from clirun import write_config
from slow_step import Stopped, alive_lines, captured_stderr, slow_step

import distrepro.orchestration.campaign as campaign_module
from distrepro.config.run_config import load_config


def test_building_the_dataset_and_jobs_is_named_while_it_lasts(
    tmp_path: Path, mlflow_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = load_config(write_config(tmp_path, name="slowdata", seeds=[0, 1]))
    out = captured_stderr(monkeypatch)
    said = "slowdata: building the dataset and the jobs of 2 seed(s) ("
    monkeypatch.setattr(campaign_module, "prepare_campaign", slow_step(out, said))
    with pytest.raises(Stopped, match="seen"):
        campaign_module.run_campaign(cfg, show_progress=False, tracking_uri=mlflow_uri)
    assert alive_lines(out) and all(f"] {said}" in line for line in alive_lines(out))
