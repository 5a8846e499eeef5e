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

from suite.api import Batch


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


@torch.no_grad()
def evaluate(model: torch.nn.Module, batches: Iterable[Batch]) -> dict[str, float]:
    """Mean cross-entropy and accuracy over ``batches``; restores the model's train/eval mode."""
    was_training = model.training
    model.eval()
    total_loss, correct, count = 0.0, 0, 0
    try:
        for batch in batches:
            logits = model(batch.inputs)
            total_loss += float(F.cross_entropy(logits, batch.targets, reduction="sum"))
            correct += int((logits.argmax(dim=1) == batch.targets).sum())
            count += len(batch)
    finally:
        model.train(was_training)
    if count == 0:
        raise ValueError("evaluation set is empty")
    return {"val_loss": total_loss / count, "val_accuracy": correct / count}
