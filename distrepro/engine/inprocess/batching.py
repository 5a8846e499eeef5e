"""Lockstep replicas' forward/backward as one batched computation, behind ``ctx.forward_backward``.

With ``batched_replicas`` on (:class:`~distrepro.config.run_config.RunConfig`), a worker's
``forward_backward`` does not compute at once: it joins the scheduler's current wave
(:meth:`~distrepro.engine.inprocess.scheduler.Scheduler.join_wave`: the workers one engine event released, e.g. all
K after a lockstep rendezvous or an all-reduce) and parks. When the wave's last worker has parked, the batcher
groups the waiting workers whose replicas and batches can be stacked (one architecture, one batch shape: unequal
batch sizes form one group per size) and computes each group as one ``vmap``-ed call
(:func:`distrepro.training.replica_batch.forward_backward_stacked`); a worker alone in its group computes as it
would have without batching. Each worker then goes on with its own gradients in its own model, charges its compute
time and calls its own ``on_bucket`` callbacks, so a method sees the contract unchanged.

Nothing is batched across engine events: a worker released by another event than its peers (an asynchronous
method's gossip barrier, a straggler) is a wave of its own. That keeps the state each replica computes on the
one it would have had alone. What can differ is the low bits of the gradients (a batched kernel sums in another
order) — hence the switch, off by default — and, where it does, the order of the workers' own code around the
call (all workers' code before it, then all workers' code after it), which only a method sharing mutable state
between workers could tell apart.

A worker computes at once, unbatched, when its model is not the engine's replica (a method swapped
``ctx.model``), :func:`~distrepro.training.replica_batch.unbatchable` names a reason (a hook, a module the batched
path does not know), the call passes ``forward_with`` (a DeepSpeed engine's own forward), grad mode is off,
or the batch is empty.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F

from distrepro.engine.harness_worker import HarnessWorker
from distrepro.engine.inprocess.scheduler import Scheduler
from distrepro.errors import ConfigError
from distrepro.training.replica_batch import forward_backward_stacked, same_structure, unbatchable

BatchedMode = bool | Literal["auto"]


@dataclass
class _Pending:
    worker: HarnessWorker
    inputs: torch.Tensor
    targets: torch.Tensor


class ReplicaBatcher:
    """The wave handler of one in-process run: batched forward/backward for the workers a wave holds."""

    def __init__(self, sched: Scheduler, replicas: Sequence[torch.nn.Module]) -> None:
        self.sched, self.replicas = sched, list(replicas)
        sched.wave_handler = self._flush
        #: forward/backward calls computed in a group of two or more, and alone (the benchmark reports coverage)
        self.batched_calls = 0
        self.solo_calls = 0

    def eligible(self, worker: HarnessWorker) -> bool:
        """Whether ``worker``'s next forward/backward may wait for its wave (see the module docstring)."""
        return (
            torch.is_grad_enabled() and worker.model is self.replicas[worker.rank] and unbatchable(worker.model) is None
        )

    def forward_backward(self, worker: HarnessWorker, inputs: torch.Tensor, targets: torch.Tensor) -> float:
        """``worker``'s forward/backward, done with its wave's; returns the mean loss (gradients are in its model)."""
        result = self.sched.join_wave(worker.rank, _Pending(worker, inputs, targets))
        if isinstance(result, BaseException):
            raise result
        return float(result)

    def _flush(self, wave: list[tuple[int, Any]]) -> list[Any]:
        """One result per item: its loss, or the exception its group raised (re-raised in the worker, so the
        failure names its rank)."""
        results: dict[int, Any] = {}
        for group in _groups(sorted(wave, key=lambda item: item[0])):
            losses: list[Any]
            try:
                with torch.enable_grad():
                    losses = _compute(group)
            except Exception as exc:
                losses = [exc] * len(group)
            if len(group) > 1:
                self.batched_calls += len(group)
            else:
                self.solo_calls += 1
            for (rank, _), value in zip(group, losses, strict=True):
                results[rank] = value
        return [results[rank] for rank, _ in wave]


def _groups(wave: list[tuple[int, Any]]) -> list[list[tuple[int, Any]]]:
    """Workers whose replicas and batches stack, in rank order; the groups in the order of their first rank."""
    groups: list[list[tuple[int, Any]]] = []
    for rank, item in wave:
        for group in groups:
            head: _Pending = group[0][1]
            if _stackable(head, item):
                group.append((rank, item))
                break
        else:
            groups.append([(rank, item)])
    return groups


def _stackable(a: _Pending, b: _Pending) -> bool:
    return (
        a.inputs.shape == b.inputs.shape
        and a.inputs.dtype == b.inputs.dtype
        and a.targets.shape == b.targets.shape
        and a.targets.dtype == b.targets.dtype
        and a.worker.label_smoothing == b.worker.label_smoothing
        and same_structure(a.worker.model, b.worker.model)
    )


def _compute(group: list[tuple[int, Any]]) -> list[float]:
    items: list[_Pending] = [item for _, item in group]
    if len(items) == 1:  # alone: exactly the unbatched computation
        (one,) = items
        out = one.worker.model(one.inputs)
        loss = F.cross_entropy(out, one.targets, label_smoothing=one.worker.label_smoothing)
        loss.backward()
        return [float(loss.detach())]
    return forward_backward_stacked(
        [i.worker.model for i in items],
        [i.inputs for i in items],
        [i.targets for i in items],
        items[0].worker.label_smoothing,
    )


def check_mode(mode: BatchedMode, model: torch.nn.Module) -> bool:
    """Whether a run batches its replicas: ``false`` never, ``auto`` when the model can be, ``true`` always (a
    model that cannot be is a :class:`~distrepro.errors.ConfigError` naming the reason)."""
    if mode is False:
        return False
    reason = unbatchable(model)
    if reason is not None and mode is True:
        raise ConfigError(None, "batched_replicas", f"true, but this model cannot be batched: {reason}")
    return reason is None
