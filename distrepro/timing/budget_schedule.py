"""Budgets and evaluation points: when to stop and when to evaluate.

Progress is measured in global units shared by all engines: ``steps`` (lockstep iterations, or
gradient computations / world size for asynchronous methods), ``samples`` processed by all
workers, ``epochs`` = samples / training-set size, and emulated seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from distrepro.config.run_config import Budget, EvalSchedule


@dataclass
class TrainingSchedule:
    budget: Budget
    eval: EvalSchedule
    dataset_size: int
    world_size: int
    steps: float = 0.0
    samples: int = 0
    gradients: int = 0
    emulated_s: float = 0.0
    _next_eval_index: int = 1

    def __post_init__(self) -> None:
        if self.eval.every_steps:
            self.eval_unit, self.eval_period = "steps", float(self.eval.every_steps)
        elif self.eval.every_epochs:
            self.eval_unit, self.eval_period = "epochs", float(self.eval.every_epochs)
        elif self.eval.every_emulated_seconds:
            self.eval_unit, self.eval_period = "emulated_seconds", float(self.eval.every_emulated_seconds)
        else:
            self.eval_unit = self.budget.unit
            self.eval_period = self.budget.amount / self.eval.times
            if self.eval_unit in ("steps", "samples"):
                self.eval_period = max(1.0, float(round(self.eval_period)))

    def state_dict(self) -> dict[str, Any]:
        """Progress so far and the next evaluation point (the budget and eval rule come from the config)."""
        return {
            "steps": self.steps,
            "samples": self.samples,
            "gradients": self.gradients,
            "emulated_s": self.emulated_s,
            "next_eval": self._next_eval_index,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.steps, self.samples, self.gradients = state["steps"], state["samples"], state["gradients"]
        self.emulated_s, self._next_eval_index = state["emulated_s"], state["next_eval"]

    @property
    def epochs(self) -> float:
        return self.samples / self.dataset_size

    def value(self, unit: str) -> float:
        return {
            "steps": self.steps,
            "epochs": self.epochs,
            "samples": float(self.samples),
            "emulated_seconds": self.emulated_s,
        }[unit]

    def record_iteration(self, samples: int, emulated_s: float) -> None:
        """A lockstep iteration finished on every worker."""
        self.steps += 1
        self.gradients += self.world_size
        self.samples += samples
        self.emulated_s = max(self.emulated_s, emulated_s)

    def record_gradient(self, samples: int, emulated_s: float) -> None:
        """One worker of an asynchronous method finished a step (events arrive in virtual-time order)."""
        self.gradients += 1
        self.steps = self.gradients / self.world_size
        self.samples += samples
        self.emulated_s = max(self.emulated_s, emulated_s)

    def budget_spent(self) -> bool:
        return self.value(self.budget.unit) >= self.budget.amount - 1e-9

    def fraction_done(self) -> float:
        return min(1.0, self.value(self.budget.unit) / self.budget.amount)

    def eval_due(self) -> bool:
        """True once per eval point crossed (several crossed at once count as one evaluation)."""
        v = self.value(self.eval_unit)
        if v + 1e-9 >= self._next_eval_index * self.eval_period:
            crossed = (v + 1e-9) / self.eval_period
            if crossed - self._next_eval_index > 1000:  # a tiny period (1e-300 s): jump, never count one by one
                self._next_eval_index = int(min(crossed, 2.0**62))
            while v + 1e-9 >= self._next_eval_index * self.eval_period:
                self._next_eval_index += 1
            return True
        return False

    @property
    def eval_points_passed(self) -> int:
        """How many evaluation points progress has crossed (the index of the last one; 0 = none)."""
        return self._next_eval_index - 1

    def epoch_index(self) -> int:
        return int(self.samples // self.dataset_size)

    @property
    def global_step(self) -> int:
        return round(self.steps) if self.gradients % self.world_size == 0 else int(self.steps)
