"""Training ingredients the harness owns: the LR schedule, the optimizer choice, the run's length in steps.

Why the harness and not each method: a paper's recipe (warm-up, cosine or step decay, AdamW) must
reach every arm of a comparison identically, and a schedule written inside one plugin (a step-decay
loop reading ``train_state["epoch"]``) silently differs from the next plugin's. Here a run's schedule
is resolved once from its config, as a pure function of the step index (:mod:`distrepro.api.lr_schedule`), so
both engines, a resumed run and ``distrepro plan`` compute the same LR for every step.

How a method takes part (``distrepro.api.method.WorkerContext``):

* ``ctx.build_optimizer(parameters, default)`` builds the run config's ``optimizer:`` overlaid on the
  method's ``default`` (fields the config leaves out stay the method's) and registers it;
* ``ctx.register_optimizer(opt)`` registers an optimizer the method built itself;
* before every step the harness sets ``ctx.lr`` to ``schedule.lr(step)`` and, when the config has a
  ``schedule:``, writes it into every param group of every registered optimizer. A method that owns its
  LR registers nothing and may read ``ctx.lr``. Without ``schedule:`` nothing is written, so a method's
  own constant LR is used bit for bit as before.

The peak LR is declared, never found by a field's name: the method's params field typed ``api.PeakLR`` (whatever
its name), replaced by the ``lr`` of its ``api.OptimizerConfig`` field and then by the run config's
``optimizer.lr`` where those are given (:func:`distrepro.api.method.declared_peak_lr`). A run's plan
(:class:`LRPlan`) is bound once, when its job is built (:attr:`distrepro.job.resolve.Job.lr_plan`), and
read from there by both engines and ``distrepro plan``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distrepro.api.lr_schedule import LRSchedule, ScheduleConfig
from distrepro.api.params import MethodParams, declared_peak_lr
from distrepro.config.run_config import RunConfig
from distrepro.errors import ConfigError

#: stands in for the length of an ``emulated_seconds`` budget, whose steps are not known in advance
UNBOUNDED_STEPS = 2**62


def peak_lr(cfg: RunConfig, params: MethodParams) -> float | None:
    """The run's peak LR (module docstring), or None when neither the method nor the config declares one."""
    lr = declared_peak_lr(params)
    if cfg.optimizer is not None and "lr" in cfg.optimizer.model_fields_set:
        lr = float(cfg.optimizer.lr)
    return lr


@dataclass(frozen=True)
class LRPlan:
    """A run's LR for every step: ``schedule`` bound to the run; ``applies``: the harness writes it into
    the registered optimizers (only when the config has a ``schedule:``)."""

    schedule: LRSchedule | None
    applies: bool
    #: the run's length in steps (:meth:`distrepro.config.run_config.Budget.total_steps`), None for an
    #: ``emulated_seconds`` budget: what methods read as ``ctx.total_steps`` and ``setting.total_steps``
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
    cfg: RunConfig,
    params: MethodParams,
    dataset_size: int,
    batch_sizes: Sequence[int],
    source: str | Path | None = None,
) -> LRPlan:
    """Bind the config's schedule to a run whose first allocation has ``batch_sizes``; errors name ``schedule``."""
    global_batch = int(sum(batch_sizes))
    total = cfg.budget.total_steps(dataset_size, global_batch)
    per_epoch = dataset_size / max(global_batch, 1)
    peak = peak_lr(cfg, params)
    sched = cfg.schedule
    if peak is None:
        if sched is not None:
            what = f"{cfg.method} declares no peak LR (a method_params field typed api.PeakLR)"
            raise ConfigError(source, "schedule", f"{what}: give optimizer.lr as the peak LR, or drop schedule:")
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
