"""Evaluations of asynchronous methods across processes: every rank contributes at its own pace.

An asynchronous method has no step at which all ranks stand together: each rank sees that an
evaluation point was crossed (global counts in the c10d store) at its own next step. A blocking
collective there could deadlock (a rank waiting in the evaluation for a rank that waits for it
as a gossip partner), so a rank *contributes* without waiting: its report goes to the store and
its parameters into a non-blocking reduce to rank 0, on a process group of the evaluations' own.
Rank 0 evaluates point *i* when that reduce completes, that is once every rank has contributed,
as the in-process engine evaluates the average of all replicas (``evaluated_on``) with every rank's
report. A contribution covers every point crossed since the rank's previous one, so every rank
issues one reduce per point, in point order, and the reduces match. Points whose earliest
observation is the same (crossed together, as seen first) are evaluated once, as in-process.

When training is over, a rank that never reached a point another rank did (its budget ran out
first) contributes its final state to it, so every evaluation covers every rank.

The consensus distance rides in the same reduce, so a point stays one non-blocking operation: each
rank appends ‖x_i − c‖² to its state and rank 0 uses Σ‖x_i − c‖² − n‖x̄ − c‖² = Σ‖x_i − x̄‖². The
identity holds for any common ``c``; taking the initial parameters (the same on every rank) rather
than 0 keeps the two terms small, so their difference does not cancel away in float64.
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from distrepro.engine.rank_reports import RankReport

#: called on rank 0 with the evaluated parameters (float64 flat), every rank's report and the consensus distance
Complete = Callable[[torch.Tensor, list[RankReport], float], None]


def flat_state(model: torch.nn.Module) -> torch.Tensor:
    """Floating parameters and buffers as one float64 vector (state_dict order)."""
    return torch.cat([t.detach().reshape(-1).double() for t in model.state_dict().values() if t.is_floating_point()])


def load_flat(model: torch.nn.Module, flat: torch.Tensor) -> None:
    """The inverse of :func:`flat_state` (integer buffers are left as they are)."""
    state = model.state_dict()
    flat = flat.cpu()
    offset = 0
    for key, value in state.items():
        if value.is_floating_point():
            n = value.numel()
            state[key] = flat[offset : offset + n].view_as(value).to(value.dtype)
            offset += n
    model.load_state_dict(state)


class AsyncEvals:
    """One rank's side of the asynchronous evaluations (rank 0 also completes them).

    ``group`` carries the reduces, ``control`` (another group) the end-of-training agreement;
    ``like`` is this rank's :func:`flat_state` before training (the reference of the consensus
    distance) and ``mask`` marks its parameter entries (:func:`distrepro.engine.evaluation.param_mask`);
    ``complete`` is called on rank 0 with the evaluated parameters (float64 flat), every rank's
    report and the consensus distance.
    """

    def __init__(
        self,
        store: Any,
        rank: int,
        world_size: int,
        group: Any,
        control: Any,
        average: bool,
        like: torch.Tensor,
        mask: torch.Tensor,
        timeout_s: float,
        complete: Complete,
    ) -> None:
        self.store, self.rank, self.world = store, rank, world_size
        self.group, self.control, self.average, self.complete = group, control, average, complete
        self.mask = mask.to(like.device)
        self.reference = like[self.mask].clone()
        self.timeout = timedelta(seconds=timeout_s)
        self.covered = 0  # the points this rank has contributed to: 1..covered
        self.pending: list[tuple[int, torch.Tensor, Any, torch.Tensor | None]] = []
        self.last_first = -1  # gradients at the earliest observation of the last point evaluated

    def contribute(self, up_to: int, flat: torch.Tensor, report: RankReport) -> None:
        """This rank's state and report for every point it crossed since its last contribution, up to
        ``up_to``; never waits for other ranks. ``flat`` is this rank's :func:`flat_state` (rank 0
        evaluates its own when ``eval_on`` is rank 0). The losses count once, at the first point."""
        square = torch.sum((flat[self.mask] - self.reference) ** 2).reshape(1)
        for point in range(self.covered + 1, up_to + 1):
            rep = report if point == self.covered + 1 else dataclasses.replace(report, loss_sum=0.0, loss_count=0)
            self.store.set(f"evalc/{point}/{self.rank}", pickle.dumps(rep))
            buf = torch.cat([flat, square])  # the state for the average and the consensus distance, one reduce
            work = dist.reduce(buf, dst=0, group=self.group, async_op=True)
            self.pending.append((point, buf, work, None if self.average else flat))
        self.covered = max(self.covered, up_to)
        self.poll()

    def poll(self, wait: bool = False) -> None:
        """Finish the reduces that are done, in order (``wait``: all of them); rank 0 evaluates them."""
        while self.pending:
            point, buf, work, own = self.pending[0]
            if wait:
                work.wait(self.timeout)
            elif not work.is_completed():
                return
            self.pending.pop(0)
            if self.rank == 0:
                mean = buf[:-1] / self.world
                offset = mean[self.mask] - self.reference
                consensus = (float(buf[-1]) - self.world * float(torch.sum(offset**2))) / self.world
                self._evaluate(point, mean if self.average else own, max(consensus, 0.0))

    def drain(self, final_contribution: Callable[[], tuple[torch.Tensor, RankReport]]) -> None:
        """After training, on every rank together: contribute to the points others reached, finish all."""
        everyone: list[Any] = [None] * self.world
        dist.all_gather_object(everyone, self.covered, group=self.control)
        if self.covered < max(everyone):
            self.contribute(max(everyone), *final_contribution())
        self.poll(wait=True)

    def _evaluate(self, point: int, flat: torch.Tensor | None, consensus: float) -> None:
        reports = [pickle.loads(self.store.get(f"evalc/{point}/{r}")) for r in range(self.world)]
        first = min(r.progress.gradients for r in reports)
        if first == self.last_first:
            return  # crossed together with the point just evaluated: one evaluation, as in-process
        self.last_first = first
        assert flat is not None
        self.complete(flat, reports, consensus)
