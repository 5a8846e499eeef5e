"""``distrepro plan``: every shipped config resolves without data or training; Local SGD's rounds are real."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from suite.cli import main
from suite.config import validate_config
from suite.engine.inprocess.run import InProcessEngine
from suite.job import build_job
from suite.plan import NOT_ESTIMATED, build_plan
from suite.registry import repo_root

ROOT = repo_root()
CONFIGS = sorted([*ROOT.glob("configs/*.yaml"), *ROOT.glob("methods/*/configs/*.yaml")])


@pytest.mark.parametrize("config", CONFIGS, ids=[str(c.relative_to(ROOT)) for c in CONFIGS])
def test_every_shipped_config_plans(config: Path) -> None:
    plan = build_plan(config)
    assert {"config", "allocation", "lr", "method_plan", "time"} <= plan.keys()
    json.dumps(plan)  # machine-readable as it is
    alloc = plan["allocation"]
    assert sum(alloc["shares"]) == pytest.approx(1.0) and len(alloc["batch_sizes"]) == len(alloc["shares"])
    assert all(t > 0 for t in plan["time"]["compute_s_per_step"] if t)
    if plan["config"]["method"] in ("ar_sgd", "local_sgd") and plan["config"]["budget"]["emulated_seconds"] is None:
        assert plan["time"]["total_s"] > plan["time"]["comm_s_per_step"] > 0


def test_paper_scale_plans_without_the_data() -> None:
    plan = build_plan(ROOT / "methods/cadp/configs/cadp.paper.yaml")
    assert not Path(plan["config"]["dataset"]["root"]).exists()  # the ImageNet-100 folder is absent here
    assert plan["dataset"]["num_classes"] == 100 and "nominal" in plan["dataset"]["note"]
    assert plan["lr"]["points"][0][1] == 0.01 and plan["lr"]["points"][-1][1] == pytest.approx(0.01 / 16)


def _local_sgd(**over: Any) -> dict[str, Any]:
    return {
        "method": "local_sgd",
        "profile": "pair-2",
        "dataset": {"params": {"train_size": 100, "test_size": 32, "image_size": 8}},
        "batch_size": [8, 16],
        "budget": {"epochs": 1.5},  # 150 samples / 24 per step → 7 steps: rounds of 3, 3, 1
        "method_params": {"period": 3},
    } | over


def test_local_sgd_rounds_match_a_real_run(profiles: Path, tmp_path: Path) -> None:
    data = _local_sgd()
    config = tmp_path / "local.yaml"
    config.write_text(json.dumps(data))
    plan = build_plan(config)
    assert plan["method_plan"]["round_lengths"] == [3, 3, 1]
    assert plan["method_plan"]["rounds"] == 3
    harness = InProcessEngine().harness(build_job(validate_config(data), 0))
    method = harness.slots[0].method
    averagings: list[int] = []
    average = method._average  # type: ignore[attr-defined]
    method._average = lambda ctx: (averagings.append(1), average(ctx))  # type: ignore[attr-defined]
    harness.run()
    assert len(averagings) == plan["method_plan"]["rounds"]


def test_methods_without_a_plan_are_not_estimated(profiles: Path, tmp_path: Path) -> None:
    config = tmp_path / "gossip.yaml"
    config.write_text(json.dumps(_local_sgd(method="gossip", method_params={})))
    plan = build_plan(config)
    assert plan["method_plan"] == NOT_ESTIMATED and plan["time"]["total_s"] == NOT_ESTIMATED
    assert plan["time"]["slowest_compute_s_per_step"] > 0


def test_cli_plan_json_and_errors(profiles: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "local.yaml"
    config.write_text(json.dumps(_local_sgd()))
    assert main(["plan", str(config), "--set", "method_params.period=2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["method_plan"]["round_lengths"] == [2, 2, 2, 1]
    assert main(["plan", str(config), "--set", "method_params.period=0"]) == 2
    assert "method_params.period" in capsys.readouterr().err
