"""Consensus distance (1/n)·Σ‖x_i − x̄‖²: logged at every evaluation for every method, untimed.

The distributed engine's values are checked against the in-process ones in ``test_engine_agreement.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from distrepro.claims.schema import validate_paper
from distrepro.config.run_config import validate_config
from distrepro.engine.evaluation import consensus_distance, param_mask
from distrepro.engine.inprocess.run import InProcessEngine
from distrepro.engine.multiprocess.evals import flat_state
from distrepro.job.resolve import build_job
from distrepro.job.results import RunResult


def _replica(weight: list[float], bias: float) -> torch.nn.Module:
    model = torch.nn.Sequential(torch.nn.Linear(2, 1), torch.nn.BatchNorm1d(1))
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor([weight]))
        model[0].bias.fill_(bias)
        model[1].running_mean.fill_(100.0 * bias)  # a buffer: not a parameter, not in the distance
    return model


def test_consensus_distance_by_hand() -> None:
    # parameters (w0, w1, b, bn.weight=1, bn.bias=0): replicas (0,0,0) (1,2,3) (2,4,6) → mean (1,2,3)
    models = [_replica([0, 0], 0), _replica([1, 2], 3), _replica([2, 4], 6)]
    # ‖x_i − x̄‖²: 1+4+9 = 14, 0, 14 → (14 + 0 + 14) / 3
    assert consensus_distance(models) == pytest.approx(28 / 3, rel=1e-15)
    assert consensus_distance([models[1], _replica([1, 2], 3)]) == 0.0
    mask = param_mask(models[0])
    assert int(mask.sum()) == 5 and len(mask) == len(flat_state(models[0]))
    assert flat_state(models[1])[mask].tolist() == [1, 2, 3, 1, 0]


def _run(method: str, **over: Any) -> RunResult:
    base: dict[str, Any] = {
        "method": method,
        "profile": "pair-2",
        "dataset": {"params": {"train_size": 128, "test_size": 64, "image_size": 8}},
        "batch_size": [8, 16],
        "budget": {"steps": 4},
        "eval": {"every_steps": 2},
    }
    return InProcessEngine().run(build_job(validate_config(base | over), 0))


def test_zero_for_all_reduce(profiles: Path) -> None:
    run = _run("ar_sgd")
    assert len(run.evals) >= 2
    assert all(e.metrics["consensus_distance"] == 0.0 for e in run.evals)


def test_positive_mid_round_and_zero_after_averaging(profiles: Path) -> None:
    run = _run("local_sgd", method_params={"period": 3}, budget={"steps": 5})
    values = [e.metrics["consensus_distance"] for e in run.evals]
    assert values[0] > 0 and values[1] > 0  # steps 2 and 4: inside a round
    assert values[-1] == pytest.approx(0.0, abs=1e-20)  # finalize averaged the replicas


def test_positive_for_gossip(profiles: Path) -> None:
    run = _run("gossip", method_params={"rate": 1.0, "poisson": False})
    assert all(e.metrics["consensus_distance"] > 0 for e in run.evals)


def test_claims_accept_consensus_distance() -> None:
    claim = {"id": "c1", "kind": "final_metric", "arm": "local_sgd", "metric": "consensus_distance"}
    claim |= {"direction": "min", "claimed": 0.1, "source": {"kind": "text"}, "evidence": "verbatim"}
    paper = {"kind": "reproduction", "citation": {"id": "p", "title": "T"}, "claims": [claim]}
    spec = validate_paper(paper, known_methods={"local_sgd"})
    assert spec.claims[0].metric == "consensus_distance"  # type: ignore[union-attr]
