"""Learning-rate schedules the harness owns: ``schedule:`` in a run config, evaluated per step.

One schedule is a linear warm-up followed by a decay. The papers this suite reproduces depend on
their reference code's exact conventions, so both families are expressible:

* QSR (``hmgxr128/QSR``, ``xscheduler.py``): warm-up from an absolute ``warmup_start_lr``
  (1e-6) to the peak, linearly over ``warmup_steps``; then cosine or linear decay to ``final_lr``
  over the remaining ``total_steps - warmup_steps`` steps, held at ``final_lr`` afterwards; step
  decay multiplies the peak by ``factor`` at each milestone. The LR of step ``t`` (0-based) is
  the value at ``t``: ``XCosineScheduler.get_lr(step)``.
* Decent-DP (``decent_dp.optim.lr_scheduler_fn_cosine_with_warmup``): warm-up from
  ``warmup_start_factor · peak`` (0.01) with torch's ``LinearLR``, then ``CosineAnnealingLR``;
  and the Transformer recipe's inverse square root after warm-up, ``peak · sqrt(W / (t + 1))``.

Schedules are pure functions of the step index, so a resumed run, ``distrepro plan`` and every
rank compute the same LR without carrying scheduler state.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Kind = Literal["constant", "step", "cosine", "linear", "inverse_sqrt"]


class ScheduleConfig(BaseModel):
    """The ``schedule:`` block of a run config (steps, or epochs converted with :meth:`resolve`)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    kind: Kind = "constant"
    warmup_steps: int | None = Field(default=None, ge=0)
    warmup_epochs: float | None = Field(default=None, ge=0)
    warmup_start_lr: float | None = Field(default=None, ge=0, description="absolute LR at step 0 (QSR: 1e-6)")
    warmup_start_factor: float | None = Field(
        default=None, ge=0, le=1, description="LR at step 0 as a fraction of the peak (Decent-DP: 0.01)"
    )
    final_lr: float = Field(default=0.0, ge=0, description="LR at the end of a cosine/linear decay")
    milestones: list[float] = Field(default_factory=list, description="step decay: steps (or epochs) of each cut")
    milestones_in: Literal["steps", "epochs"] = "steps"
    factor: float = Field(default=0.1, gt=0, description="step decay: multiplier at each milestone")

    @model_validator(mode="after")
    def _one_way_each(self) -> ScheduleConfig:
        if self.warmup_steps is not None and self.warmup_epochs is not None:
            raise ValueError("give warmup_steps or warmup_epochs, not both")
        if self.warmup_start_lr is not None and self.warmup_start_factor is not None:
            raise ValueError("give warmup_start_lr or warmup_start_factor, not both")
        if self.milestones and self.kind != "step":
            raise ValueError(f"milestones apply to kind: step, not {self.kind}")
        if sorted(self.milestones) != list(self.milestones):
            raise ValueError("milestones must be increasing")
        return self

    def resolve(self, peak_lr: float, total_steps: int, steps_per_epoch: float) -> LRSchedule:
        """Bind the schedule to a run: the method's peak LR and the run's length in steps."""
        warmup = self.warmup_steps
        if warmup is None:
            warmup = round((self.warmup_epochs or 0.0) * steps_per_epoch)
        if self.warmup_start_lr is not None:
            start = self.warmup_start_lr
        else:
            start = peak_lr * (self.warmup_start_factor if self.warmup_start_factor is not None else 0.0)
        scale = steps_per_epoch if self.milestones_in == "epochs" else 1.0
        milestones = tuple(round(m * scale) for m in self.milestones)
        return LRSchedule(self.kind, peak_lr, total_steps, warmup, start, self.final_lr, milestones, self.factor)


class LRSchedule:
    """A schedule bound to a run; ``lr(t)`` is the LR used by 0-based step ``t``."""

    def __init__(
        self,
        kind: Kind,
        peak_lr: float,
        total_steps: int,
        warmup_steps: int = 0,
        warmup_start_lr: float = 0.0,
        final_lr: float = 0.0,
        milestones: tuple[int, ...] = (),
        factor: float = 0.1,
    ) -> None:
        if total_steps < 1:
            raise ValueError(f"a schedule needs at least one step, got total_steps={total_steps}")
        self.kind = kind
        self.peak_lr = peak_lr
        self.total_steps = total_steps
        self.warmup_steps = warmup_steps
        self.warmup_start_lr = warmup_start_lr
        self.final_lr = final_lr
        self.milestones = milestones
        self.factor = factor

    def lr(self, step: int) -> float:
        if step < self.warmup_steps:  # linear from the start LR; the peak is reached at step = warmup_steps
            return self.warmup_start_lr + step * (self.peak_lr - self.warmup_start_lr) / self.warmup_steps
        return self._decay(step)

    def _decay(self, step: int) -> float:
        peak, final = self.peak_lr, self.final_lr
        since = step - self.warmup_steps
        span = max(self.total_steps - self.warmup_steps, 1)
        if self.kind == "constant":
            return peak
        if self.kind == "step":
            return peak * self.factor ** sum(step >= m for m in self.milestones)
        if self.kind == "cosine":
            done = min(since, span)
            return final + 0.5 * (peak - final) * (1.0 + math.cos(math.pi * done / span))
        if self.kind == "linear":
            done = min(since, span)
            return final + (span - done) * (peak - final) / span
        # inverse_sqrt: Decent-DP's Transformer/WMT recipe, peak * sqrt(W / (t + 1)) after the warm-up
        return peak * math.sqrt(max(self.warmup_steps, 1) / (step + 1))

    def points(self, count: int = 5) -> list[tuple[int, float]]:
        """``count`` evenly spaced (step, lr) pairs from 0 to the last step, for plans and reports."""
        last = self.total_steps - 1
        steps = sorted({round(i * last / max(count - 1, 1)) for i in range(count)} | {self.warmup_steps})
        return [(s, self.lr(s)) for s in steps if 0 <= s <= last]
