"""K replicas' forward and backward as one batched computation: ``torch.func.functional_call`` under ``torch.vmap``.

The in-process engine trains K replicas of one architecture. Run one after another, each small forward and backward
pays torch's per-operator overhead K times; stacked along a leading replica axis, the K replicas' parameters,
buffers and batches go through each operator once (a convolution over stacked weights becomes one grouped
convolution). Measured on the suite's own workloads (``benchmarks/batched_replicas.py``, BENCHMARKS.md).

What each replica gets is what its own forward and backward would have given it: its own gradients in
``p.grad`` (added to a gradient already there, as ``loss.backward()`` adds), its own BatchNorm running statistics
(the buffers are stacked, updated in place under ``vmap`` and copied back per replica), its own mean loss. The
numbers agree with the one-after-another path to float32 rounding, not bit for bit: a batched kernel sums in
another order. That is why the engine batches only when the run config asks (``batched_replicas``).

Only models this module can vouch for are batched (:func:`unbatchable` says why not): made of the modules in
:data:`BATCHABLE_MODULES` (no dropout that draws random numbers, no BatchNorm whose momentum is ``None``, whose
update reads a counter as a Python number), with no hooks, which ``functional_call`` would bypass or run on
batched tensors.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from distrepro.training.models import BasicBlock, CNN1d, ResNetCIFAR, SmallCNN

#: module types whose forward is a pure function of parameters, buffers and input (BatchNorm updates its stacked
#: buffers in place, which ``vmap`` supports); a model holding any other module is run one replica at a time
BATCHABLE_MODULES: tuple[type[nn.Module], ...] = (
    SmallCNN,
    CNN1d,
    BasicBlock,
    ResNetCIFAR,
    nn.Sequential,
    nn.Conv1d,
    nn.Conv2d,
    nn.Linear,
    nn.BatchNorm1d,
    nn.BatchNorm2d,
    nn.ReLU,
    nn.MaxPool2d,
    nn.AdaptiveAvgPool1d,
    nn.AdaptiveAvgPool2d,
    nn.Flatten,
    nn.Identity,
)


_KNOWN = frozenset(BATCHABLE_MODULES)
_BN = nn.modules.batchnorm._BatchNorm


def examine(model: nn.Module) -> tuple[str | None, tuple[object, ...]]:
    """In one pass over the model (it runs at every step): why it cannot join a batched forward/backward (None if
    it can), and what replicas must share to be stacked (hashable, equal keys stack: the class, every parameter's
    and buffer's name, shape, dtype and device, which parameters need gradients, every module's training mode)."""
    reason: str | None = None
    g = nn.modules.module
    if g._global_forward_hooks or g._global_forward_pre_hooks or g._global_backward_hooks:
        reason = "global module hooks are registered"
    parts: list[object] = [type(model)]
    for prefix, module in model.named_modules():
        parts.append((prefix, module.training))
        if reason is None:
            reason = _problem(module)
        for name, p in module._parameters.items():
            if p is not None:
                parts.append((name, p.shape, p.dtype, p.device, p.requires_grad))
                if reason is None and (p._backward_hooks or getattr(p, "_post_accumulate_grad_hooks", None)):
                    reason = "a parameter has gradient hooks"
        for name, b in module._buffers.items():
            if b is not None:
                parts.append((name, b.shape, b.dtype, b.device))
    return reason, tuple(parts)


def _problem(module: nn.Module) -> str | None:
    if type(module) not in _KNOWN:
        return f"module {type(module).__name__} is not one the batched path knows to be a pure function"
    if isinstance(module, _BN) and module.momentum is None:
        return "a BatchNorm with momentum None (cumulative average) reads its counter as a Python number"
    if module._forward_hooks or module._forward_pre_hooks or module._backward_hooks or module._backward_pre_hooks:
        return f"module {type(module).__name__} has hooks"
    return None


def unbatchable(model: nn.Module) -> str | None:
    """Why ``model`` cannot join a batched forward/backward, or None if it can (:func:`examine`)."""
    return examine(model)[0]


def stack_key(model: nn.Module) -> tuple[object, ...]:
    """What replicas must share to be stacked (:func:`examine`)."""
    return examine(model)[1]


def forward_backward_stacked(
    models: Sequence[nn.Module],
    inputs: Sequence[torch.Tensor],
    targets: Sequence[torch.Tensor],
    label_smoothing: float = 0.0,
) -> list[float]:
    """Forward and backward of ``models[i]`` on ``(inputs[i], targets[i])`` for every i at once, with the
    harness's loss (mean cross-entropy); returns each replica's loss. Gradients land in each replica's parameters,
    running statistics in its buffers. Every replica must have the :func:`stack_key` of ``models[0]`` and every
    batch the same shape (the caller groups replicas by batch size)."""
    base = models[0]
    names = [n for n, _ in base.named_parameters()]
    buffer_names = [n for n, _ in base.named_buffers()]
    own = [dict(m.named_parameters()) for m in models]
    own_buffers = [dict(m.named_buffers()) for m in models]
    with torch.no_grad():
        stacked = {n: torch.stack([o[n] for o in own]) for n in names}
        buffers = {n: torch.stack([o[n] for o in own_buffers]) for n in buffer_names}
    for n in names:
        stacked[n].requires_grad_(own[0][n].requires_grad)
    x, y = torch.stack(list(inputs)), torch.stack(list(targets))

    def loss(
        p: dict[str, torch.Tensor], b: dict[str, torch.Tensor], xi: torch.Tensor, yi: torch.Tensor
    ) -> torch.Tensor:
        return F.cross_entropy(functional_call(base, (p, b), (xi,)), yi, label_smoothing=label_smoothing)

    losses = torch.vmap(loss)(stacked, buffers, x, y)
    losses.sum().backward()  # replicas share nothing: d(sum)/d(replica i's weights) is replica i's own gradient
    with torch.no_grad():
        for i, (params, bufs) in enumerate(zip(own, own_buffers, strict=True)):
            for n in names:
                grad = stacked[n].grad
                if grad is None:
                    continue  # unused by the forward: backward would have left it untouched too
                p = params[n]
                if p.grad is None:
                    p.grad = grad[i]
                else:
                    p.grad += grad[i]
            for n in buffer_names:
                bufs[n].copy_(buffers[n][i])
    return [float(v) for v in losses.detach()]
