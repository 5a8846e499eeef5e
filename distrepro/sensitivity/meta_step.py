"""A probe's optimizer steps on the meta device: the first runs, the repeats that could change nothing are skipped.

A probe (:mod:`distrepro.sensitivity.probe`) runs the method's real ``train_step`` on a copy of the model on the
meta device, where a tensor has a shape and no values. C-ADP's round is ``⌈B_j / b_j⌉`` local SGD steps, and
on meta tensors each step still dispatches every elementwise operation through torch's Python reference
kernels: in C-ADP's proxy report, 3,700 such steps were most of the probes' CPU.

On meta tensors a stock ``torch.optim.SGD`` step has one observable effect, the momentum buffers it creates in
``optimizer.state`` the first time a parameter has a gradient; its in-place updates of parameters and buffers
have no values to change. So once every parameter with a gradient has its buffer (or its group has no
momentum), a repeat step leaves the optimizer, the model and the recorded events exactly as they were, and is
skipped. Anything else runs the real step: another optimizer class (its step may communicate or read
values), a closure, step hooks (global or the optimizer's own), a parameter that is not on meta, a parameter
that gained a gradient since (its buffer is still to be made).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.optim import optimizer as _optimizer


def _repeat_changes_nothing(opt: torch.optim.Optimizer) -> bool:
    """Whether ``opt.step()`` would only update values that meta tensors do not have."""
    hooks = (
        _optimizer._global_optimizer_pre_hooks,
        _optimizer._global_optimizer_post_hooks,
        opt._optimizer_step_pre_hooks,
        opt._optimizer_step_post_hooks,
    )
    if any(hooks):
        return False
    for group in opt.param_groups:
        momentum = group["momentum"] != 0
        for p in group["params"]:
            if not p.is_meta:
                return False
            if momentum and p.grad is not None and opt.state.get(p, {}).get("momentum_buffer") is None:
                return False
    return True


class _MetaSGDStep:
    """``opt.step`` for a probe: the real step, unless a repeat could change nothing (module docstring)."""

    def __init__(self, opt: torch.optim.SGD) -> None:
        self._opt, self._real = opt, opt.step
        self.skipped = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs or not _repeat_changes_nothing(self._opt):
            return self._real(*args, **kwargs)
        self.skipped += 1
        return None


def steps_once_on_meta(opt: Any) -> Any:
    """``opt`` itself; a stock ``torch.optim.SGD`` over meta parameters gets the probe's step (module docstring)."""
    if type(opt) is torch.optim.SGD and all(p.is_meta for g in opt.param_groups for p in g["params"]):
        opt.step = _MetaSGDStep(opt)  # type: ignore[method-assign]
    return opt
