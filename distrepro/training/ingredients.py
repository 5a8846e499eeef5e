"""Training ingredients the harness owns: the LR schedule, the optimizer choice, the run's length in steps.

Why the harness and not each method: a paper's recipe (warm-up, cosine or step decay, AdamW) must
reach every arm of a comparison identically, and a schedule written inside one plugin (a step-decay
loop reading ``train_state["epoch"]``) silently differs from the next plugin's. Here a run's schedule
is resolved once from its config, as a pure function of the step index (:mod:`distrepro.training.lr_schedule`), so
both engines, a resumed run and ``distrepro plan`` compute the same LR for every step.

How a method takes part (``distrepro.api.method.WorkerContext``):

* ``ctx.build_optimizer(parameters, default)`` builds the run config's ``optimizer:`` overlaid on the
  method's ``default`` (fields the config leaves out stay the method's) and registers it;
* ``ctx.register_optimizer(opt)`` registers an optimizer the method built itself;
* before every step the harness sets ``ctx.lr`` to ``schedule.lr(step)`` and, when the config has a
  ``schedule:``, writes it into every param group of every registered optimizer. A method that owns its
  LR registers nothing and may read ``ctx.lr``. Without ``schedule:`` nothing is written, so a method's
  own constant LR is used bit for bit as before.

The peak LR is the method's ``lr`` param, replaced by ``method_params.optimizer.lr`` and then by the run
config's ``optimizer.lr`` where those are given.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distrepro.config.run_config import Budget, RunConfig
from distrepro.errors import ConfigError
from distrepro.training.lr_schedule import LRSchedule, ScheduleConfig
from distrepro.training.optimizer_config import OptimizerConfig

#: stands in for the length of an ``emulated_seconds`` budget, whose steps are not known in advance
UNBOUNDED_STEPS = 2**62


def overlay(base: OptimizerConfig, override: OptimizerConfig | None) -> OptimizerConfig:
    """``base`` with the fields ``override`` sets explicitly (a config's ``{name: adamw}`` keeps the method's lr)."""
    if override is None:
        return base
    return base.model_copy(update={k: getattr(override, k) for k in override.model_fields_set})


def method_optimizer(params: Any) -> OptimizerConfig:
    """The optimizer a method's params describe: SGD from its ``lr``/``momentum``/``weight_decay``/``nesterov``,
    with its ``optimizer`` param (if it has one) overlaid."""
    base = OptimizerConfig(
        name="sgd",
        lr=float(getattr(params, "lr", OptimizerConfig().lr)),
        momentum=float(getattr(params, "momentum", 0.0)),
        weight_decay=float(getattr(params, "weight_decay", 0.0)),
        nesterov=bool(getattr(params, "nesterov", False)),
    )
    return overlay(base, getattr(params, "optimizer", None))


def peak_lr(cfg: RunConfig, params: Any) -> float | None:
    """The run's peak LR (module docstring), or None when neither the method nor the config names one."""
    lr: float | None = getattr(params, "lr", None)
    for opt in (getattr(params, "optimizer", None), cfg.optimizer):
        if isinstance(opt, OptimizerConfig) and "lr" in opt.model_fields_set:
            lr = opt.lr
    return None if lr is None else float(lr)


def total_steps(budget: Budget, dataset_size: int, global_batch: int) -> int | None:
    """Steps in the budget, for any unit but ``emulated_seconds`` (None: how many steps fit in a span of
    virtual time is known only once the run has taken them). A step processes ``global_batch`` samples
    (the allocation's batch sizes summed; for an asynchronous method, one gradient of every worker)."""
    if budget.unit == "steps":
        return int(budget.amount)
    if budget.unit == "emulated_seconds":
        return None
    samples = budget.amount * dataset_size if budget.unit == "epochs" else budget.amount
    return max(1, math.ceil(samples / max(global_batch, 1) - 1e-9))


@dataclass(frozen=True)
class LRPlan:
    """A run's LR for every step: ``schedule`` bound to the run; ``applies``: the harness writes it into
    the registered optimizers (only when the config has a ``schedule:``)."""

    schedule: LRSchedule | None
    applies: bool
    total_steps: int | None
    steps_per_epoch: float

    def lr(self, step: int) -> float | None:
        return None if self.schedule is None else self.schedule.lr(step)

    def begin_step(self, worker: Any, step: int) -> None:
        """Before ``step``: set ``ctx.lr`` and, if the schedule applies, every registered optimizer's LR."""
        lr = self.lr(step)
        worker.lr = lr
        if self.applies and lr is not None:
            for opt in worker.optimizers:
                for group in opt.param_groups:
                    group["lr"] = lr


def lr_plan(
    cfg: RunConfig, params: Any, dataset_size: int, batch_sizes: Sequence[int], source: str | Path | None = None
) -> LRPlan:
    """Bind the config's schedule to a run whose first allocation has ``batch_sizes``; errors name ``schedule``."""
    global_batch = int(sum(batch_sizes))
    total = total_steps(cfg.budget, dataset_size, global_batch)
    per_epoch = dataset_size / max(global_batch, 1)
    peak = peak_lr(cfg, params)
    sched = cfg.schedule
    if peak is None:
        if sched is not None:
            raise ConfigError(source, "schedule", f"{cfg.method} has no lr param: give optimizer.lr as the peak LR")
        return LRPlan(None, False, total, per_epoch)
    if sched is not None and total is None and sched.kind in ("cosine", "linear"):
        what = f"a {sched.kind} decay needs the run's length in steps"
        raise ConfigError(source, "schedule.kind", f"{what}: use a budget in steps, epochs or samples")
    config = sched if sched is not None else ScheduleConfig()  # constant: ctx.lr is the peak
    return LRPlan(config.resolve(peak, total or UNBOUNDED_STEPS, per_epoch), sched is not None, total, per_epoch)


def check_optimizer(cfg: RunConfig, accepts: bool, source: str | Path | None = None) -> None:
    """A run config's ``optimizer:`` for a method that never builds one would be silently ignored: refuse it."""
    if cfg.optimizer is not None and not accepts:
        raise ConfigError(
            source, "optimizer", f"{cfg.method} does not build its optimizer with ctx.build_optimizer; drop optimizer:"
        )
