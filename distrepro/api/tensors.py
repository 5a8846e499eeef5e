"""Small optimiser helpers that several method plugins share."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from distrepro.api.collectives import Comm, Group


def sgd(
    model: torch.nn.Module, lr: float, momentum: float, weight_decay: float, nesterov: bool = False
) -> torch.optim.SGD:
    """Plain ``torch.optim.SGD`` over all parameters (heavy-ball momentum, coupled weight decay)."""
    return torch.optim.SGD(
        model.parameters(),
        lr=lr,
        momentum=momentum,
        weight_decay=weight_decay,
        nesterov=nesterov and momentum > 0,
    )


def grads_of(model: torch.nn.Module) -> list[torch.Tensor]:
    """Every parameter's gradient, materialising zeros where a parameter got none."""
    out = []
    for p in model.parameters():
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        out.append(p.grad)
    return out


def float_buffers(model: torch.nn.Module) -> list[torch.Tensor]:
    """Floating buffers (BatchNorm running statistics); integer counters are left alone."""
    return [b for b in model.buffers() if b.is_floating_point()]


def state_tensors(model: torch.nn.Module) -> list[torch.Tensor]:
    """Parameters and floating buffers: what model averaging averages."""
    return [p.data for p in model.parameters()] + float_buffers(model)


def broadcast_buffers(comm: Comm, buffers: list[torch.Tensor], src: int = 0, group: Group | None = None) -> None:
    """Broadcast floating buffers (BatchNorm statistics) from ``src`` (a global rank) over ``group`` (all
    ranks by default) as one bucket, as DDP's ``broadcast_buffers=True`` does every step."""
    if not buffers:
        return
    flat = torch.cat([b.reshape(-1) for b in buffers])
    comm.broadcast(flat, src=src, group=group)
    offset = 0
    for b in buffers:
        b.copy_(flat[offset : offset + b.numel()].view_as(b))
        offset += b.numel()


def flat_parameters(parameters: Sequence[torch.Tensor]) -> torch.Tensor:
    """Move ``parameters`` into one new contiguous buffer and return it; each parameter's ``data`` becomes a view of
    its slice (values, gradients, the parameter objects and the optimizers holding them are unchanged).

    Why: a method that moves whole replicas (gossip, averaging) can then write the buffer in place, instead of
    copying the parameters to a flat vector and back at every event (``parameters_to_vector`` /
    ``vector_to_parameters``). The arithmetic is the same element by element, so the numbers are too. The aliasing
    lasts until something rebinds a parameter's ``data`` (``vector_to_parameters``, ``module.to`` to another device
    or dtype): call it once, in ``setup``, on a model that stays where it is.
    """
    params = list(parameters)
    if not params:
        return torch.zeros(0)
    mixed = {(p.dtype, p.device) for p in params}
    if len(mixed) > 1:
        raise ValueError(f"flat_parameters: one dtype and device needed, got {sorted(map(str, mixed))}")
    with torch.no_grad():
        flat = torch.cat([p.detach().reshape(-1) for p in params])
    offset = 0
    for p in params:
        n = p.numel()
        p.data = flat[offset : offset + n].view_as(p)
        offset += n
    return flat


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Set every param group's LR: how the harness applies its schedule before a step."""
    for group in optimizer.param_groups:
        group["lr"] = lr
