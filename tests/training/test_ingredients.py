"""Training ingredients the harness owns (issue 12): the schedule, the optimizer factory, the run's length."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from distrepro.config.run_config import RunConfig, validate_config
from distrepro.errors import ConfigError
from distrepro.job.resolve import build_job

#: warm-up 0.02 → 0.1 over 2 steps, then cosine to 0 over the 4 remaining steps (hand-computed)
SCHEDULE = {"kind": "cosine", "warmup_steps": 2, "warmup_start_lr": 0.02}
EXPECTED = [0.02, 0.06, 0.1, 0.05 + 0.05 * math.cos(math.pi / 4), 0.05, 0.05 - 0.05 * math.cos(math.pi / 4)]


def _cfg(method: str = "lr_probe", **over: Any) -> RunConfig:
    base: dict[str, Any] = {
        "method": method,
        "profile": "pair-2",
        "dataset": {"params": {"train_size": 256, "test_size": 64, "image_size": 8}},
        "batch_size": [8, 16],
        "budget": {"steps": 6},
        "eval": {"every_steps": 1},
        "dist": {"timeout_s": 30},
        "torch_threads": 1,
    }
    return validate_config(base | over)


def _check_lrs(evals: list[Any]) -> None:
    used = [e.method_records["lr_used"] for e in evals if not e.final]
    assert used == pytest.approx(EXPECTED[: len(used)], rel=1e-12)
    assert [e.metrics["lr"] for e in evals if not e.final] == pytest.approx(EXPECTED[: len(used)], rel=1e-12)
    assert all(e.method_records["ctx_lr"] == e.method_records["lr_used"] for e in evals)
    assert evals[-1].method_records["total_steps"] == 6


def test_the_optimizer_steps_with_the_schedules_lr_in_process(profiles: Path, with_test_plugins: Callable) -> None:
    from distrepro.engine.inprocess.run import InProcessEngine

    with_test_plugins("lr_probe")
    cfg = _cfg(schedule=SCHEDULE, method_params={"optimizer": {"name": "adamw", "weight_decay": 0.01}})
    result = InProcessEngine().run(build_job(cfg, 0))
    _check_lrs(result.evals)


@pytest.mark.distributed
def test_the_optimizer_steps_with_the_schedules_lr_under_torch_distributed(
    profiles: Path, with_test_plugins: Callable
) -> None:
    from distrepro.engine.multiprocess.launch import DistEngine

    with_test_plugins("lr_probe")
    cfg = _cfg(schedule=SCHEDULE, engine="dist")
    _check_lrs(DistEngine().run_cell(build_job(cfg, 0), None).evals)


def test_total_steps_for_every_budget_unit(profiles: Path) -> None:
    from distrepro.training.ingredients import lr_plan

    def total_steps(budget: dict[str, float]) -> int | None:
        return validate_config({"method": "x", "budget": budget}).budget.total_steps(256, 24)

    cfg = _cfg("ar_sgd")
    assert cfg.budget.total_steps(256, 24) == 6
    assert total_steps({"epochs": 1}) == 11  # ⌈256/24⌉
    assert total_steps({"samples": 48}) == 2
    assert total_steps({"emulated_seconds": 3}) is None
    plan = lr_plan(_cfg("ar_sgd", budget={"epochs": 2}), build_job(cfg, 0).params, 256, [8, 16])
    assert (plan.total_steps, plan.steps_per_epoch, plan.applies) == (22, 256 / 24, False)
    assert plan.lr(0) == plan.lr(21) == 0.05  # no schedule: the method's own lr, untouched


def test_step_schedule_in_epochs_without_a_step_decay_loop_in_the_plugin(profiles: Path) -> None:
    from distrepro.engine.inprocess.run import InProcessEngine

    sched = {"kind": "step", "milestones": [0.5], "milestones_in": "epochs", "factor": 0.5}
    cfg = _cfg("cadp", schedule=sched, budget={"epochs": 1}, eval={"every_epochs": 0.25})
    cfg = cfg.model_copy(update={"method_params": {"micro_batch": 8, "round_epochs": 0.25, "speeds": "declared"}})
    result = InProcessEngine().run(build_job(cfg, 0))
    lrs = [e.method_records["lr"] for e in result.evals]  # C-ADP records its optimizer's LR every round
    assert lrs == pytest.approx([0.01, 0.01, 0.005, 0.005])  # 4 rounds; halved from epoch 0.5 (round 2)


def test_ar_sgd_and_local_sgd_take_any_optimizer(profiles: Path) -> None:
    from distrepro.engine.inprocess.run import InProcessEngine
    from distrepro.training.optimizers import AccumAdam

    for method, opt, kind in [
        ("ar_sgd", {"name": "adamw", "lr": 1e-3}, torch.optim.AdamW),
        ("ar_sgd", {"name": "adam"}, torch.optim.Adam),
        ("local_sgd", {"name": "accum_adamw", "accum_iter": 2}, AccumAdam),
    ]:
        harness = InProcessEngine().harness(build_job(_cfg(method, budget={"steps": 2}, optimizer=opt), 0))
        harness.run()
        built = harness.slots[0].method.opt
        assert type(built) is kind
        assert built.param_groups[0]["lr"] == opt.get("lr", 0.05)  # fields left out stay the method's


def test_ingredient_errors_name_the_field(profiles: Path) -> None:
    with pytest.raises(ConfigError, match="optimizer"):
        build_job(_cfg("gossip", optimizer={"name": "adamw"}), 0)  # gossip would ignore it
    with pytest.raises(ConfigError, match=r"schedule\.kind"):
        build_job(_cfg("ar_sgd", schedule={"kind": "cosine"}, budget={"emulated_seconds": 1.0}), 0)


def test_label_smoothing_changes_the_training_loss(profiles: Path) -> None:
    from distrepro.engine.inprocess.run import InProcessEngine

    plain = InProcessEngine().run(build_job(_cfg("ar_sgd", budget={"steps": 1}), 0))
    smooth = InProcessEngine().run(build_job(_cfg("ar_sgd", budget={"steps": 1}, loss={"label_smoothing": 0.1}), 0))
    # same first step on the same model and batch: only the loss differs (smoothing raises CE at init)
    assert smooth.evals[0].metrics["train_loss"] != pytest.approx(plain.evals[0].metrics["train_loss"], rel=1e-6)


# --------------------------------------------------------------------------- the peak LR is declared

INNER_LR_METHOD = """
from distrepro import api


class Params(api.MethodParams):
    inner_lr: api.PeakLR = 0.03
    outer_lr: api.LearningRate = 0.7  # a learning rate, but not the peak the schedule scales


class Method(api.Method[Params]):
    def setup(self, ctx: api.WorkerContext) -> None:
        self.opt = ctx.register_optimizer(api.sgd(ctx.model, self.params.inner_lr, 0.0, 0.0))

    def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None:
        ctx.forward_backward(batch)
        ctx.comm.weighted_average(api.grads_of(ctx.model), weight=len(batch))
        self.opt.step()
        ctx.record("lr_used", self.opt.param_groups[0]["lr"])
"""

#: a field named ``lr`` that is not declared: no longer the peak by its name
UNDECLARED_METHOD = INNER_LR_METHOD.replace("inner_lr: api.PeakLR = 0.03", "lr: float = 0.03").replace(
    "self.params.inner_lr", "self.params.lr"
)


@pytest.fixture
def declared_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from distrepro.plugins import roots

    root = tmp_path / "declared"
    for name, text in (("inner_lr_method", INNER_LR_METHOD), ("undeclared_method", UNDECLARED_METHOD)):
        (root / "methods" / name).mkdir(parents=True)
        (root / "methods" / name / "method.py").write_text(text, encoding="utf-8")
    monkeypatch.setenv(roots.PATH_ENV, str(root))
    return root


def test_a_peak_lr_named_inner_lr_is_scheduled_and_logged(profiles: Path, declared_root: Path) -> None:
    from distrepro.engine.inprocess.run import InProcessEngine

    sched = {"kind": "cosine", "warmup_steps": 2, "warmup_start_lr": 0.006}
    result = InProcessEngine().run(build_job(_cfg("inner_lr_method", schedule=sched), 0))
    evals = [e for e in result.evals if not e.final]
    assert [e.metrics["lr"] for e in evals][:3] == pytest.approx([0.006, 0.018, 0.03], rel=1e-12)  # peak 0.03
    assert [e.method_records["lr_used"] for e in evals][:3] == pytest.approx([0.006, 0.018, 0.03], rel=1e-12)
    plain = InProcessEngine().run(build_job(_cfg("inner_lr_method"), 0))
    assert plain.final.metrics["lr"] == 0.03  # no schedule: the declared peak, logged


def test_a_field_merely_named_lr_is_no_peak_and_a_schedule_for_it_is_refused(
    profiles: Path, declared_root: Path
) -> None:
    from distrepro.engine.inprocess.run import InProcessEngine

    result = InProcessEngine().run(build_job(_cfg("undeclared_method", budget={"steps": 2}), 0))
    assert "lr" not in result.final.metrics
    with pytest.raises(ConfigError, match=r"schedule.*undeclared_method declares no peak LR .*api\.PeakLR"):
        build_job(_cfg("undeclared_method", schedule=SCHEDULE), 0, "run.yaml")


def test_a_params_model_declares_at_most_one_peak_lr() -> None:
    from distrepro import api

    class Two(api.MethodParams):
        inner_lr: api.PeakLR = 0.1
        outer_lr: api.PeakLR = 0.7

    with pytest.raises(TypeError, match=r"Two declares 2 peak LRs \(inner_lr, outer_lr\); declare one"):

        class Method(api.Method[Two]):
            def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None: ...


def test_the_declared_peak_lr_of_every_shipped_method() -> None:
    """Each shipped method declares its peak: a PeakLR field, or (Decent-DP, SGP) its optimizer's lr."""
    from distrepro.api.params import declared_peak_lr
    from distrepro.plugins.registry import methods

    peaks = {name: declared_peak_lr(plugin.cls.Params()) for name, plugin in methods().items()}
    assert all(v is not None and v > 0 for v in peaks.values()), peaks
    assert peaks["decentdp"] == peaks["sgp"] == 7e-4 and peaks["cadp"] == 0.01
