"""The synchronization rule: how many local steps the next round takes, from the LR it starts at.

Why a module of its own: the same pure function decides the period inside a run (``method.py``), in
``distrepro plan`` (every round's length before anything trains) and in the report's H-schedule
figure, so the three cannot disagree. It restates the bookkeeping of the official code
(github.com/hmgxr128/QSR @ 93f0fac, ``localopt.py``, ``LocalOptimizer.adjust_h``, called by
``trainer_process.py`` right after each averaging, once the scheduler has set the LR of the next step):

* during the LR warm-up (``step < warmup_steps``), or with ``alpha = 0``, the period is ``H_base``;
* otherwise ``H = max(H_base, floor((alpha / lr) ** gamma))`` with ``lr`` the LR of the round's first
  step (QSR: ``gamma = 2``; the linear rule H ~ 1/lr: ``gamma = 1``; the paper's ablation: other gammas);
* the only cap is the remaining budget: the last round ends with the run;
* the first round is ``H_base`` whatever the LR (the official optimizer starts at ``init_h`` and
  recomputes only after an averaging).

Post-local SGD (Lin et al. 2020) is the same loop with ``H = 1`` before ``switch_step``; after it the
rule above applies (a constant ``H_base`` with ``alpha = 0``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

#: the period when the LR is ~0 and the run's length is unknown (an ``emulated_seconds`` budget): no sync
NEVER = 2**62


@dataclass(frozen=True)
class SyncRule:
    """The period rule of one arm (fields as in :class:`method.Params`)."""

    h_base: int
    alpha: float = 0.0
    gamma: float = 2.0
    warmup_steps: int = 0
    switch_step: int = 0  # post-local SGD: H = 1 before this step

    def __post_init__(self) -> None:
        if self.h_base < 1:
            raise ValueError(f"h_base must be >= 1, got {self.h_base}")
        if self.alpha < 0 or self.gamma <= 0:
            raise ValueError(f"alpha must be >= 0 and gamma > 0, got alpha={self.alpha}, gamma={self.gamma}")

    def period(self, step: int, lr: float | None, total_steps: int | None, first: bool = False) -> int:
        """Length of the round whose first step is ``step`` (0-based) and runs at ``lr``."""
        if step < self.switch_step:
            h = 1
        elif first or step < self.warmup_steps or self.alpha == 0 or lr is None or lr <= 0:
            h = self.h_base
        else:
            h = self._grown(self.alpha / lr, None if total_steps is None else total_steps - step)
        if total_steps is not None:
            h = min(h, total_steps - step)
        return max(h, 1)

    def _grown(self, base: float, remaining: int | None) -> int:
        """``max(H_base, floor(base ** gamma))``; a ratio past the remaining steps is the remaining steps."""
        try:
            ratio = base**self.gamma
        except OverflowError:  # an LR of ~0: the round lasts as long as the run
            ratio = math.inf
        if remaining is not None and ratio >= remaining:
            return remaining
        if not math.isfinite(ratio):
            return NEVER
        return max(self.h_base, int(ratio))  # int() truncates: floor for a positive ratio, as the reference


def round_lengths(rule: SyncRule, lr: Callable[[int], float | None], total_steps: int) -> list[int]:
    """Every round's length, in order, for a run of ``total_steps`` whose step ``t`` runs at ``lr(t)``."""
    lengths: list[int] = []
    step = 0
    while step < total_steps:
        h = rule.period(step, lr(step), total_steps, first=not lengths)
        lengths.append(h)
        step += h
    return lengths


def run_length(lengths: list[int]) -> str:
    """``[4, 4, 4, 5, 9]`` as ``"4×3, 5, 9"``: the whole schedule, readable when it has thousands of rounds."""
    parts: list[str] = []
    i = 0
    while i < len(lengths):
        j = i
        while j < len(lengths) and lengths[j] == lengths[i]:
            j += 1
        parts.append(f"{lengths[i]}×{j - i}" if j - i > 1 else str(lengths[i]))
        i = j
    return ", ".join(parts)


def first_growth(rule: SyncRule, lengths: list[int]) -> int | None:
    """The first step of the first round longer than ``H_base`` (not counting the budget's end), or None."""
    step = 0
    for h in lengths:
        if h > rule.h_base and step >= rule.switch_step:
            return step
        step += h
    return None
