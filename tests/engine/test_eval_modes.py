"""Evaluation modes (``eval.replicas``, ``eval.bn_recalibration_batches``): by hand, deterministic, untimed,
and the same on both engines."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from distrepro.api.method import Batch
from distrepro.config.run_config import RunConfig, validate_config
from distrepro.engine.eval_modes import recalibrate_bn, recalibration_batches, replica_stats
from distrepro.engine.evaluation import average_into, evaluate
from distrepro.engine.inprocess.run import InProcessEngine
from distrepro.engine.multiprocess.launch import DistEngine
from distrepro.engine.streams import iterate_eval
from distrepro.job.resolve import build_job
from distrepro.job.results import RunResult

BN_MODEL = {"name": "resnet18_cifar", "params": {"width": 2}}


def _cfg(method: str, **over: Any) -> RunConfig:
    base: dict[str, Any] = {
        "method": method,
        "profile": "pair-2",
        "dataset": {"params": {"train_size": 128, "test_size": 64, "image_size": 8}},
        "batch_size": [8, 16],
        "budget": {"steps": 4},
        "eval": {"every_steps": 2},
        "dist": {"timeout_s": 30},
    }
    return validate_config(base | over)


def _run(cfg: RunConfig) -> RunResult:
    return InProcessEngine().run(build_job(cfg, 0))


# ---------------------------------------------------------------------- by hand


def test_replica_stats_by_hand() -> None:
    out = replica_stats([{"val_loss": 1.0, "val_accuracy": 0.5}, {"val_loss": 3.0, "val_accuracy": 0.25}])
    assert out["replica_val_loss_mean"] == 2.0 and out["replica_val_loss_std"] == 1.0  # population std
    assert (out["replica_val_loss_min"], out["replica_val_loss_max"]) == (1.0, 3.0)
    assert out["replica_val_accuracy_mean"] == 0.375 and out["replica_val_accuracy_std"] == 0.125
    assert len(out) == 8
    with pytest.raises(ValueError, match="every replica"):
        replica_stats([{"val_loss": 1.0, "val_accuracy": 0.5}, None])


def _tiny_bn() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.BatchNorm2d(2), nn.Dropout(0.5), nn.Flatten(), nn.Linear(2 * 2 * 2, 3))


def test_recalibration_gives_the_mean_of_the_batches_statistics() -> None:
    """momentum=None: running mean/var = the mean over batches of each batch's mean / unbiased variance."""
    model = _tiny_bn()
    model.train(False)
    bn = model[0]
    g = torch.Generator().manual_seed(1)
    batches = [Batch(torch.randn(n, 2, 2, 2, generator=g) * 3 + 1, torch.zeros(n, dtype=torch.int64)) for n in (4, 6)]
    rng = torch.get_rng_state()
    assert recalibrate_bn(model, batches) is True
    per_channel = [b.inputs.transpose(0, 1).reshape(2, -1) for b in batches]
    mean = sum(x.mean(dim=1) for x in per_channel) / 2
    var = sum(x.var(dim=1, unbiased=True) for x in per_channel) / 2
    assert torch.allclose(bn.running_mean, mean, atol=1e-6) and torch.allclose(bn.running_var, var, atol=1e-5)
    assert int(bn.num_batches_tracked) == 2
    assert bn.momentum == 0.1 and not model.training and not bn.training  # restored
    assert torch.equal(torch.get_rng_state(), rng)  # dropout stayed off: no random numbers drawn


def test_recalibration_leaves_a_model_without_batchnorm_alone() -> None:
    model = nn.Sequential(nn.Flatten(), nn.Linear(8, 3))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert recalibrate_bn(model, [Batch(torch.ones(2, 2, 2, 2), torch.zeros(2, dtype=torch.int64))]) is False
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_recalibration_batches_are_derived(profiles: Path) -> None:
    bundle = build_job(_cfg("ar_sgd"), 0).bundle
    a, b = (recalibration_batches(bundle, 3, 5, ("p", "prof", 0)) for _ in range(2))
    other = recalibration_batches(bundle, 3, 5, ("p", "prof", 1))
    assert [len(x) for x in a] == [5, 5, 5]
    assert all(torch.equal(x.inputs, y.inputs) for x, y in zip(a, b, strict=True))
    assert not torch.equal(a[0].inputs, other[0].inputs)


# ---------------------------------------------------------------------- in a run


@pytest.mark.parametrize("engine", ["inprocess", pytest.param("dist", marks=pytest.mark.distributed)])
def test_replica_statistics_are_those_of_each_replica(
    profiles: Path, with_test_plugins: Callable[..., Path], engine: str
) -> None:
    """``fixed_replicas`` never changes its (different) replicas: every evaluation's statistics are theirs,
    also when asynchronous ranks contribute to an evaluation at their own pace (distributed engine)."""
    with_test_plugins("fixed_replicas")
    cfg = _cfg("fixed_replicas", eval={"every_steps": 2, "replicas": True})
    job = build_job(cfg, 0)
    replicas = [job.make_model(), job.make_model()]
    with torch.no_grad():
        for q in replicas[1].parameters():
            q.add_(job.params.shift)  # type: ignore[attr-defined]
    batches = list(iterate_eval(job.bundle, cfg.eval.batch_size))
    losses = [evaluate(m, batches)["val_loss"] for m in replicas]
    assert losses[0] != pytest.approx(losses[1], rel=1e-3)
    run = (
        _run(cfg)
        if engine == "inprocess"
        else DistEngine().run_cell(build_job(cfg.model_copy(update={"engine": "dist"}), 0), None)
    )
    assert len(run.evals) >= 2
    for e in run.evals:
        assert e.metrics["replica_val_loss_mean"] == pytest.approx(sum(losses) / 2, rel=1e-6)
        assert e.metrics["replica_val_loss_std"] == pytest.approx(abs(losses[0] - losses[1]) / 2, rel=1e-5)
        assert e.metrics["replica_val_loss_min"] == pytest.approx(min(losses), rel=1e-6)
        assert e.metrics["replica_val_loss_max"] == pytest.approx(max(losses), rel=1e-6)
        assert e.metrics["val_loss"] != pytest.approx(e.metrics["replica_val_loss_mean"], rel=1e-4)  # the average's own


def test_replica_statistics_are_off_by_default_and_agree_when_replicas_do(profiles: Path) -> None:
    plain = _run(_cfg("ar_sgd"))
    assert not any(k.startswith("replica_") for k in plain.final.metrics)
    run = _run(_cfg("ar_sgd", eval={"every_steps": 2, "replicas": True}))
    for e in run.evals:  # lockstep all-reduce: every replica is the averaged model
        assert e.metrics["replica_val_loss_std"] == pytest.approx(0.0, abs=1e-7)
        assert e.metrics["replica_val_loss_mean"] == pytest.approx(e.metrics["val_loss"], rel=1e-6)
        assert e.metrics["replica_val_accuracy_min"] == e.metrics["replica_val_accuracy_max"]
    assert [e.metrics["val_loss"] for e in run.evals] == [e.metrics["val_loss"] for e in plain.evals]


def test_bn_recalibration_scores_the_recalibrated_average_untimed_and_deterministically(profiles: Path) -> None:
    """Local SGD mid-round (period 3): the replicas differ; the evaluation at step 2 scores their average with
    BatchNorm statistics re-estimated on the derived batches, and training is exactly as without it."""
    over = {"model": BN_MODEL, "method_params": {"period": 3}}
    plain = _run(_cfg("local_sgd", **over))
    cfg = _cfg("local_sgd", **over, eval={"every_steps": 2, "bn_recalibration_batches": 3})
    run, again = _run(cfg), _run(cfg)
    for a, b in zip(plain.models, run.models, strict=True):  # the replicas never saw the recalibration
        assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))
    for ep, er in zip(plain.evals, run.evals, strict=True):  # nor did the clocks
        assert (er.step, er.emulated_s) == (ep.step, ep.emulated_s)
        assert [w.clock_s for w in er.workers] == [w.clock_s for w in ep.workers]
    assert [e.metrics for e in again.evals] == [e.metrics for e in run.evals]  # deterministic
    first = run.evals[0]
    assert first.metrics["val_loss"] != pytest.approx(plain.evals[0].metrics["val_loss"], rel=1e-6)
    # by hand, at the final evaluation (the replicas as the run ended): average, recalibrate, score
    job = build_job(cfg, 0)
    model = job.make_model()
    average_into(model, run.models)
    recalibrate_bn(model, recalibration_batches(job.bundle, 3, 16, job.seed_parts))  # largest batch of [8, 16]
    expected = evaluate(model, iterate_eval(job.bundle, cfg.eval.batch_size))
    assert run.final.metrics["val_loss"] == pytest.approx(expected["val_loss"], rel=1e-6)
    assert run.final.metrics["val_accuracy"] == expected["val_accuracy"]


def test_bn_recalibration_leaves_a_model_without_batchnorm_scored_as_before(profiles: Path) -> None:
    plain = _run(_cfg("local_sgd", method_params={"period": 3}))
    run = _run(_cfg("local_sgd", method_params={"period": 3}, eval={"every_steps": 2, "bn_recalibration_batches": 2}))
    assert [e.metrics for e in run.evals] == [e.metrics for e in plain.evals]


# ---------------------------------------------------------------------- both engines


@pytest.mark.distributed
def test_evaluation_modes_agree_on_both_engines(profiles: Path) -> None:
    """A synchronous method (Local SGD mid-round, a BatchNorm model): the same keys and, to float
    tolerance, the same values in every evaluation in-process and under torch.distributed."""
    cfg = _cfg(
        "local_sgd",
        model=BN_MODEL,
        method_params={"period": 3},
        eval={"every_steps": 2, "replicas": True, "bn_recalibration_batches": 2},
    )
    a = _run(cfg)
    b = DistEngine().run_cell(build_job(cfg.model_copy(update={"engine": "dist"}), 0), None)
    assert len(a.evals) == len(b.evals) >= 2
    for ea, eb in zip(a.evals, b.evals, strict=True):
        assert set(eb.metrics) == set(ea.metrics) >= {"replica_val_loss_mean", "replica_val_accuracy_std"}
        for key, value in ea.metrics.items():
            if math.isnan(value):
                assert math.isnan(eb.metrics[key]), key
            else:
                assert eb.metrics[key] == pytest.approx(value, rel=1e-5, abs=1e-6), key
    assert a.evals[0].metrics["replica_val_loss_std"] > 0  # mid-round: the replicas differ
