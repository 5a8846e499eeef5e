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
between workers could tell apart: torch's global random generator is such state (the shipped methods draw from
``ctx.rng``, each worker's own, as the method contract asks).

A worker computes at once, unbatched, when it would be alone in its wave (no other worker has joined it or is
still to run: an asynchronous method's worker released by its own event), when its model is not the engine's
replica (a method swapped ``ctx.model``), when :func:`~distrepro.training.replica_batch.unbatchable` names a reason
(a hook, a module the batched path does not know), when the call passes ``forward_with`` (a DeepSpeed engine's own
forward), when grad mode is off, or when the batch is empty.
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
from distrepro.training.replica_batch import examine, forward_backward_stacked, unbatchable

BatchedMode = bool | Literal["auto"]


@dataclass
class _Pending:
    worker: HarnessWorker
    inputs: torch.Tensor
    targets: torch.Tensor
    stack_key: tuple[object, ...]  # the model's (examine)


class ReplicaBatcher:
    """The wave handler of one in-process run: batched forward/backward for the workers a wave holds."""

    def __init__(self, sched: Scheduler, replicas: Sequence[torch.nn.Module]) -> None:
        self.sched, self.replicas = sched, list(replicas)
        sched.wave_handler = self._flush
        #: forward/backward calls computed in a group of two or more, and those that joined a wave yet found no peer
        #: to stack with (another batch size); calls computed at once (alone in their wave) are in neither
        self.batched_calls = 0
        self.solo_calls = 0

    def eligible(self, worker: HarnessWorker) -> bool:
        """Whether ``worker``'s next forward/backward goes through :meth:`forward_backward` (see the module
        docstring); the wave's last worker, alone in it, computes at once: the flush would do the same."""
        return self.sched.wave_has_company() and torch.is_grad_enabled() and worker.model is self.replicas[worker.rank]

    def forward_backward(self, worker: HarnessWorker, inputs: torch.Tensor, targets: torch.Tensor) -> float:
        """``worker``'s forward/backward, done with its wave's, or at once when its model cannot be batched as it
        is now (:func:`~distrepro.training.replica_batch.examine`); returns the mean loss, gradients in its model."""
        reason, key = examine(worker.model)
        if reason is not None:
            return _compute_one(worker, inputs, targets)
        result = self.sched.join_wave(worker.rank, _Pending(worker, inputs, targets, key))
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
    groups: dict[tuple[object, ...], list[tuple[int, Any]]] = {}
    for rank, item in wave:
        groups.setdefault(_key(item), []).append((rank, item))
    return list(groups.values())


def _key(item: _Pending) -> tuple[object, ...]:
    x, y = item.inputs, item.targets
    return x.shape, x.dtype, y.shape, y.dtype, item.worker.label_smoothing, item.stack_key


def _compute(group: list[tuple[int, Any]]) -> list[float]:
    items: list[_Pending] = [item for _, item in group]
    if len(items) == 1:
        return [_compute_one(items[0].worker, items[0].inputs, items[0].targets)]
    return forward_backward_stacked(
        [i.worker.model for i in items],
        [i.inputs for i in items],
        [i.targets for i in items],
        items[0].worker.label_smoothing,
    )


def _compute_one(worker: HarnessWorker, inputs: torch.Tensor, targets: torch.Tensor) -> float:
    """Exactly the unbatched computation (:meth:`HarnessWorker.forward_backward`'s own)."""
    loss = F.cross_entropy(worker.model(inputs), targets, label_smoothing=worker.label_smoothing)
    loss.backward()
    return float(loss.detach())


def check_mode(mode: BatchedMode, model: torch.nn.Module) -> bool:
    """Whether a run batches its replicas: ``false`` never, ``auto`` when the model can be, ``true`` always (a
    model that cannot be is a :class:`~distrepro.errors.ConfigError` naming the reason)."""
    if mode is False:
        return False
    reason = unbatchable(model)
    if reason is not None and mode is True:
        raise ConfigError(None, "batched_replicas", f"true, but this model cannot be batched: {reason}")
    return reason is None
