"""Untimed evaluation of the model a method produced.

Evaluation is the observer's view, not part of training: it costs no virtual time and does not
change any worker. By default the harness evaluates the parameter (and buffer) average of all
replicas, which is the model synchronous methods hold anyway and the consensus model of
decentralised ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
import torch.nn.functional as F

from distrepro import metrics as M
from distrepro.api.method import Batch


@torch.no_grad()
def average_into(target: torch.nn.Module, models: Sequence[torch.nn.Module]) -> None:
    """Set ``target``'s floating parameters and buffers to the mean over ``models``.

    Integer buffers (BatchNorm's ``num_batches_tracked``) are taken from the first model.
    """
    states = [m.state_dict() for m in models]
    out = {}
    for key, value in states[0].items():
        if value.is_floating_point():
            acc = value.detach().clone()
            for s in states[1:]:
                acc.add_(s[key])
            out[key] = acc / len(states)
        else:
            out[key] = value.clone()
    target.load_state_dict(out)


def param_vector(model: torch.nn.Module) -> torch.Tensor:
    """The model's parameters (not buffers) as one float64 vector: what consensus distance is over."""
    return torch.cat([p.detach().reshape(-1).double() for p in model.parameters()])


def param_mask(model: torch.nn.Module) -> torch.Tensor:
    """Which entries of :func:`distrepro.engine.multiprocess.evals.flat_state` (floating state_dict order) are
    parameters.

    The asynchronous distributed evaluation reduces the whole floating state; the consensus distance
    takes its parameter entries from that same mean vector rather than reducing a second one.
    """
    names = {name for name, _ in model.named_parameters()}
    parts = [
        torch.full((t.numel(),), key in names, dtype=torch.bool)
        for key, t in model.state_dict().items()
        if t.is_floating_point()
    ]
    return torch.cat(parts)


@torch.no_grad()
def consensus_distance(models: Sequence[torch.nn.Module]) -> float:
    """(1/n)·Σ_i ‖x_i − x̄‖² over the parameters of the ``n`` replicas (0 when they agree).

    How far decentralised replicas are from their average: the quantity their convergence proofs
    bound, and what separates them from lockstep all-reduce (always 0). Summed in rank order in
    float64, as the distributed engine's reduce does.
    """
    vectors = [param_vector(m) for m in models]
    mean = vectors[0].clone()
    for v in vectors[1:]:
        mean.add_(v)
    mean /= len(vectors)
    total = 0.0
    for v in vectors:
        total += float(torch.sum((v - mean) ** 2))
    return total / len(vectors)


@torch.no_grad()
def evaluate(model: torch.nn.Module, batches: Iterable[Batch]) -> dict[str, float]:
    """Mean cross-entropy and accuracy over ``batches`` (CPU batches are moved to the model's device, a GPU's
    under ``device: cuda``); restores the model's train/eval mode. The metrics are Python floats."""
    was_training = model.training
    model.eval()
    first = next(iter(model.parameters()), None)
    device = first.device if first is not None else torch.device("cpu")
    total_loss, correct, count = 0.0, 0, 0
    try:
        for batch in batches:
            if device.type != "cpu":
                batch = Batch(batch.inputs.to(device), batch.targets.to(device))
            logits = model(batch.inputs)
            total_loss += float(F.cross_entropy(logits, batch.targets, reduction="sum"))
            correct += int((logits.argmax(dim=1) == batch.targets).sum())
            count += len(batch)
    finally:
        model.train(was_training)
    if count == 0:
        raise ValueError("evaluation set is empty")
    return {M.VAL_LOSS: total_loss / count, M.VAL_ACCURACY: correct / count}
