"""Model cost figures for the virtual clock: training FLOPs per sample and model size in bytes.

The hardware profiles charge compute time per sample and communication time per byte; both
depend on the model, so the harness measures them here rather than trusting hand-written numbers.
FLOPs come from ``torch.utils.flop_counter.FlopCounterMode``, which counts matrix multiplications
and convolutions (2·m·n·k for an ``m×k @ k×n`` product), forward and backward, and ignores cheap
element-wise ops (activations, BatchNorm, the loss). The backward pass is counted as autograd
runs it: the input does not require a gradient, so the first layer computes only its weight
gradient (≈1× its forward FLOPs) while deeper layers also compute input gradients (≈2×).

Nothing is cached: a cached figure would silently go stale when a model is changed in place.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

_COUNT_BATCH = 2  # > 1 so that train-mode BatchNorm can compute batch statistics


def train_flops_per_sample(model: nn.Module, input_shape: Sequence[int]) -> float:
    """Forward + backward FLOPs of one training sample of shape ``input_shape`` (no batch dim).

    Counted in train mode on a random batch of 2 (then halved) on the model's own device and
    dtype, with ``output.sum()`` as the loss. The model is left as it was: per-module
    train/eval flags, gradients (``.grad``) and buffers (BatchNorm running statistics, which a
    train-mode forward would otherwise update) are all restored.
    """
    first = next(iter(model.parameters()), None)
    device = first.device if first is not None else torch.device("cpu")
    dtype = first.dtype if first is not None and first.is_floating_point() else torch.float32
    modes = [(m, m.training) for m in model.modules()]
    params = list(model.parameters())
    grads = [p.grad for p in params]
    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    try:
        for p in params:
            p.grad = None
        model.train()
        x = torch.randn(_COUNT_BATCH, *(int(d) for d in input_shape), device=device, dtype=dtype)
        with FlopCounterMode(display=False) as counter:
            out = model(x)
            if not isinstance(out, torch.Tensor):
                raise TypeError(f"model output must be a tensor of logits, got {type(out).__name__}")
            loss = out.float().sum()
            if loss.requires_grad:  # a fully frozen model has no backward pass to count
                loss.backward()
        total = counter.get_total_flops()
    finally:
        for p, g in zip(params, grads, strict=True):
            p.grad = g
        with torch.no_grad():
            for b, saved in buffers:
                b.copy_(saved)
        for m, training in modes:
            m.training = training
    return float(total) / _COUNT_BATCH


def param_bytes(model: nn.Module) -> int:
    """Bytes of all parameters and buffers, at the dtype they are stored in.

    This is what one full model exchange (parameters + BatchNorm statistics) moves, which is
    what averaging-based methods send; shared tensors are counted once.
    """
    seen: set[int] = set()
    total = 0
    for t in [*model.parameters(), *model.buffers()]:
        if id(t) in seen:
            continue
        seen.add(id(t))
        total += t.numel() * t.element_size()
    return total
