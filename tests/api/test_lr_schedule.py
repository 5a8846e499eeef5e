"""LR schedules against hand-computed values and against the torch schedulers a reference code uses."""

from __future__ import annotations

import math

import pytest
import torch
from pydantic import ValidationError

from distrepro.api.lr_schedule import LRSchedule, ScheduleConfig

pytestmark = pytest.mark.smoke


def qsr_cosine(total: int = 12) -> LRSchedule:
    """QSR's convention: warm-up from 1e-6, cosine down to 1e-6 over the steps after warm-up."""
    return ScheduleConfig(kind="cosine", warmup_steps=4, warmup_start_lr=1e-6, final_lr=1e-6).resolve(0.8, total, 1)


def test_cosine_with_absolute_warmup_start_hand_values() -> None:
    s = qsr_cosine()
    assert s.lr(0) == pytest.approx(1e-6)
    assert s.lr(2) == pytest.approx(1e-6 + 2 * (0.8 - 1e-6) / 4)  # half-way through warm-up
    assert s.lr(4) == pytest.approx(0.8)  # peak at the first step after warm-up
    assert s.lr(8) == pytest.approx(1e-6 + 0.5 * (0.8 - 1e-6))  # cos(pi/2) = 0: half-way down
    assert s.lr(12) == pytest.approx(1e-6)  # end of the decay
    assert s.lr(50) == pytest.approx(1e-6)  # held, not periodic


def test_linear_decay_hand_values() -> None:
    s = ScheduleConfig(kind="linear", warmup_steps=4, warmup_start_lr=1e-6, final_lr=1e-6).resolve(0.8, 12, 1)
    assert s.lr(4) == pytest.approx(0.8)
    assert s.lr(8) == pytest.approx(1e-6 + 4 * (0.8 - 1e-6) / 8)
    assert s.lr(11) == pytest.approx(1e-6 + 1 * (0.8 - 1e-6) / 8)
    assert s.lr(20) == pytest.approx(1e-6)


def test_step_decay_cuts_at_each_milestone_in_epochs() -> None:
    s = ScheduleConfig(kind="step", milestones=[3, 6], milestones_in="epochs", factor=0.1).resolve(1.0, 100, 10)
    assert [s.lr(t) for t in (0, 29, 30, 59, 60, 99)] == pytest.approx([1, 1, 0.1, 0.1, 0.01, 0.01])


def test_step_decay_after_warmup() -> None:
    s = ScheduleConfig(kind="step", warmup_steps=2, milestones=[5], factor=0.5).resolve(0.4, 10, 1)
    assert [s.lr(t) for t in range(7)] == pytest.approx([0, 0.2, 0.4, 0.4, 0.4, 0.2, 0.2])


def test_inverse_sqrt_after_relative_warmup() -> None:
    s = ScheduleConfig(kind="inverse_sqrt", warmup_steps=4, warmup_start_factor=0.01).resolve(1.0, 100, 1)
    assert s.lr(0) == pytest.approx(0.01)
    assert s.lr(2) == pytest.approx(0.01 + 2 * 0.99 / 4)
    assert s.lr(4) == pytest.approx(math.sqrt(4 / 5))
    assert s.lr(15) == pytest.approx(0.5)


def test_constant_and_warmup_epochs_convert_with_steps_per_epoch() -> None:
    s = ScheduleConfig(kind="constant", warmup_epochs=2).resolve(0.1, 100, 10)
    assert s.warmup_steps == 20
    assert s.lr(10) == pytest.approx(0.05)
    assert s.lr(20) == s.lr(99) == pytest.approx(0.1)


def test_equals_decent_dp_cosine_with_warmup_built_from_torch_schedulers() -> None:
    """decent_dp.optim.lr_scheduler_fn_cosine_with_warmup = SequentialLR(LinearLR(0.01), CosineAnnealingLR)."""
    total, warmup, peak, eta_min = 40, 8, 1e-3, 1e-6
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=peak)
    ref = torch.optim.lr_scheduler.SequentialLR(
        opt,
        schedulers=[
            torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.01, total_iters=warmup),
            torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total - warmup, eta_min=eta_min),
        ],
        milestones=[warmup],
    )
    ours = ScheduleConfig(kind="cosine", warmup_steps=warmup, warmup_start_factor=0.01, final_lr=eta_min)
    s = ours.resolve(peak, total, 1)
    for t in range(total):
        assert s.lr(t) == pytest.approx(opt.param_groups[0]["lr"], rel=1e-9, abs=1e-12), t
        opt.step()
        ref.step()


def test_points_include_the_end_of_warmup() -> None:
    steps = [t for t, _ in qsr_cosine().points(3)]
    assert steps == [0, 4, 6, 11]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"warmup_steps": 2, "warmup_epochs": 1}, "not both"),
        ({"warmup_start_lr": 0.1, "warmup_start_factor": 0.1}, "not both"),
        ({"kind": "cosine", "milestones": [3]}, "kind: step"),
        ({"kind": "step", "milestones": [5, 3]}, "increasing"),
        ({"kind": "warp"}, "kind"),
        ({"factor": 0}, "factor"),
    ],
)
def test_bad_schedules_are_rejected(fields: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        ScheduleConfig(**fields)
