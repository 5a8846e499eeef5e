"""A probe's optimizer steps on the meta device: the first makes its momentum buffers, the repeats are skipped.

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

The first step's one effect, the buffers, is made directly where that is exactly what the real step would make
(:func:`_first_step_buffers`): each is ``grad.detach().clone()`` of the gradient after weight decay, and on meta
that sum of a gradient and its parameter of one shape, dtype and strides has the gradient's very shape, dtype and
strides, so the clone of the gradient itself is the same meta tensor. Each probe builds its method afresh, so its
first step came once per probe: in C-ADP's proxy report 660 of them, a millisecond each through the reference
kernels, against microseconds for the clones. Tensor-valued hyperparameters, ``foreach``/``fused``/
``differentiable`` groups, sparse or mismatched gradients keep the real step.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.optim import optimizer as _optimizer


def _meta_only(opt: torch.optim.Optimizer) -> bool:
    """Whether ``opt.step()`` has no hook to call and only meta parameters, whose values it cannot change."""
    hooks = (
        _optimizer._global_optimizer_pre_hooks,
        _optimizer._global_optimizer_post_hooks,
        opt._optimizer_step_pre_hooks,
        opt._optimizer_step_post_hooks,
    )
    return not any(hooks) and all(p.is_meta for group in opt.param_groups for p in group["params"])


def _plain_dense(p: torch.Tensor, grad: torch.Tensor) -> bool:
    """Whether ``grad.add(p)`` (weight decay) would have exactly ``grad``'s meta shape, dtype and strides."""
    return (
        grad.is_meta
        and grad.layout == torch.strided
        and grad.dtype == p.dtype
        and grad.shape == p.shape
        and grad.stride() == p.stride()
        and grad.is_contiguous()
    )


def _first_step_buffers(opt: torch.optim.Optimizer) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
    """The (parameter, gradient) pairs whose momentum buffer ``opt.step()`` would make, in the order it stores
    them (none: a repeat, which changes nothing), when making them by hand is exactly the real step's effect
    (module docstring); None when only the real step will do."""
    todo: list[tuple[torch.Tensor, torch.Tensor]] = []
    for group in opt.param_groups:
        if group["momentum"] == 0:
            continue
        mine = [
            (p, p.grad)
            for p in group["params"]
            if p.grad is not None and opt.state.get(p, {}).get("momentum_buffer") is None
        ]
        if not mine:
            continue
        numbers = [group[k] for k in ("lr", "momentum", "weight_decay", "dampening")]
        if any(isinstance(v, torch.Tensor) for v in numbers) or any(
            group.get(k) for k in ("differentiable", "foreach", "fused")
        ):
            return None
        if not all(_plain_dense(p, grad) for p, grad in mine):
            return None
        todo += mine
    return todo


class _MetaSGDStep:
    """``opt.step`` for a probe: the real step, unless a repeat could change nothing (module docstring)."""

    def __init__(self, opt: torch.optim.SGD) -> None:
        self._opt, self._real = opt, opt.step
        self.skipped = self.made = 0  # repeats skipped; first steps whose buffers were made directly

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        todo = None if args or kwargs or not _meta_only(self._opt) else _first_step_buffers(self._opt)
        if todo is None:
            return self._real(*args, **kwargs)
        if todo:
            for p, grad in todo:  # SGD: buf = grad.detach().clone() of the decayed gradient, stored in state
                self._opt.state[p]["momentum_buffer"] = grad.detach().clone()
            self.made += 1
        else:
            self.skipped += 1
        return None


def steps_once_on_meta(opt: Any) -> Any:
    """``opt`` itself; a stock ``torch.optim.SGD`` over meta parameters gets the probe's step (module docstring)."""
    if type(opt) is torch.optim.SGD and all(p.is_meta for g in opt.param_groups for p in g["params"]):
        opt.step = _MetaSGDStep(opt)  # type: ignore[method-assign]
    return opt
