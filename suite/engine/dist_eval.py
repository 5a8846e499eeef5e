"""Evaluations of asynchronous methods across processes: every rank contributes at its own pace.

An asynchronous method has no step at which all ranks stand together: each rank sees that an
evaluation point was crossed (global counts in the c10d store) at its own next step. A blocking
collective there could deadlock (a rank waiting in the evaluation for a rank that waits for it
as a gossip partner), so a rank *contributes* without waiting: its report goes to the store
under its next sequence number, and, when the method evaluates the average of the replicas, its
parameters go to rank 0 by a non-blocking send on a process group of the evaluations' own.
Rank 0 evaluates point *i* once every rank has contributed to it, as the in-process engine
evaluates the average of all replicas (``eval_on``) with every rank's report.

When training is over, a rank that never contributed to a point another rank did (its budget
ran out first, or it crossed several points in one step) contributes its final state to it, so
every evaluation covers every rank. Sends and receives between two ranks are posted in the same
order (the sequence numbers), so they match on any backend.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from suite.engine.reports import RankReport

#: called on rank 0 with the evaluated parameters (float64 flat) and every rank's report
Complete = Callable[[torch.Tensor, list[RankReport]], None]


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
    """One rank's side of the asynchronous evaluations (rank 0 also collects and completes them).

    ``like`` is this rank's :func:`flat_state` (size, dtype and device of every contribution);
    ``complete`` is called on rank 0 with the evaluated parameters and every rank's report.
    """

    def __init__(
        self,
        store: Any,
        rank: int,
        world_size: int,
        group: Any,
        average: bool,
        like: torch.Tensor,
        timeout_s: float,
        complete: Complete,
    ) -> None:
        self.store, self.rank, self.world, self.group = store, rank, world_size, group
        self.average, self.like, self.complete = average, like, complete
        self.timeout = timedelta(seconds=timeout_s)
        self.mine: list[int] = []  # the evaluation points this rank contributed to, in order
        self.sends: list[tuple[torch.Tensor, Any]] = []
        # rank 0 only: what has arrived, per evaluation point and rank
        self.next_seq = [0] * world_size
        self.seen = 0
        self.got: dict[int, dict[int, tuple[RankReport, torch.Tensor | None, Any]]] = {}

    def contribute(self, index: int, flat: torch.Tensor | None, report: RankReport) -> None:
        """This rank's state and report for evaluation point ``index``; never waits for other ranks.

        ``flat`` (:func:`flat_state`) is needed from every rank for the average, from rank 0 alone otherwise.
        """
        seq = len(self.mine)
        self.mine.append(index)
        if self.rank == 0:
            self.got.setdefault(index, {})[0] = (report, flat, None)
            self.poll()
            return
        self.store.set(f"evalc/{self.rank}/{seq}", pickle.dumps((index, report)))
        if self.average:
            assert flat is not None
            self.sends.append((flat, dist.isend(flat, dst=0, group=self.group)))
        self.store.add("evalc/announced", 1)
        self.sends = [(t, w) for t, w in self.sends if not w.is_completed()]

    def poll(self) -> None:
        """Rank 0: take in what other ranks announced and evaluate the points that are complete, in order."""
        if self.rank != 0 or not self.got:
            return
        announced = int(self.store.add("evalc/announced", 0))
        if announced != self.seen:
            self.seen = announced
            for r in range(1, self.world):
                while self.store.check([f"evalc/{r}/{self.next_seq[r]}"]):
                    self._receive(r)
        self._complete_ready(wait=False)

    def drain(self, final_contribution: Callable[[], tuple[torch.Tensor | None, RankReport]]) -> None:
        """After training, on every rank together: fill the points some rank missed, then finish them all."""
        everyone: list[Any] = [None] * self.world
        dist.all_gather_object(everyone, self.mine, group=self.group)
        points = sorted({i for indices in everyone for i in indices})
        for index in points:
            if index not in self.mine:
                self.contribute(index, *final_contribution())
        if self.rank != 0:
            for _, work in self.sends:
                work.wait(self.timeout)
            self.sends = []
            return
        for r in range(1, self.world):  # every rank has now made one contribution per point
            while self.next_seq[r] < len(points):
                self.store.wait([f"evalc/{r}/{self.next_seq[r]}"], self.timeout)
                self._receive(r)
        self._complete_ready(wait=True)

    # ------------------------------------------------------------------ rank 0
    def _receive(self, r: int) -> None:
        index, report = pickle.loads(self.store.get(f"evalc/{r}/{self.next_seq[r]}"))
        self.next_seq[r] += 1
        buf, work = None, None
        if self.average:
            buf = torch.empty_like(self.like)
            work = dist.irecv(buf, src=r, group=self.group)
        self.got.setdefault(index, {})[r] = (report, buf, work)

    def _complete_ready(self, wait: bool) -> None:
        for index in sorted(self.got):
            parts = self.got[index]
            if len(parts) < self.world:
                return  # points complete in order: a later one waits for this one
            works = [w for _, _, w in parts.values() if w is not None]
            if wait:
                for w in works:
                    w.wait(self.timeout)
            elif not all(w.is_completed() for w in works):
                return
            del self.got[index]
            flat = parts[0][1]
            assert flat is not None
            if self.average:
                flat = flat.clone()
                for r in range(1, self.world):
                    flat.add_(parts[r][1])  # type: ignore[arg-type]
                flat /= self.world
            self.complete(flat, [parts[r][0] for r in range(self.world)])
