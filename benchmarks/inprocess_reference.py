"""The plain-PyTorch reference loop that ``benchmarks/inprocess_overhead.py`` times the in-process engine against.

Why a module of its own: the reference is what every overhead figure is divided by, so it is kept where it can be
read on its own and checked to do the same work as the engine's side (same replicas, same batches of B samples by
``index_select`` of a shard, same optimizer, same averaging), with none of the timing or reporting around it.
"""

from __future__ import annotations

import copy
import time

import torch
import torch.nn.functional as F

from distrepro.job.resolve import Job

#: SGD with momentum on both sides: the plain loop's optimizers and the engine's ``method_params``
LR, MOMENTUM = 0.05, 0.9


class _Shard:
    """Endless reshuffled batches from one worker's shard (randperm per pass, one index_select)."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, idx: torch.Tensor, batch: int, seed: int) -> None:
        self.x, self.y, self.idx, self.batch = x, y, idx, batch
        self.gen = torch.Generator().manual_seed(seed)
        self.order = self.idx[torch.randperm(len(self.idx), generator=self.gen)]
        self.pos = 0

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self.pos + self.batch > len(self.order):
            self.order = self.idx[torch.randperm(len(self.idx), generator=self.gen)]
            self.pos = 0
        i = self.order[self.pos : self.pos + self.batch]
        self.pos += self.batch
        return self.x.index_select(0, i), self.y.index_select(0, i)


@torch.no_grad()
def average(per_replica: list[list[torch.Tensor]]) -> None:
    """Flatten every replica's tensors, take the mean over replicas, copy it back into all."""
    flat = torch.stack([torch.cat([t.reshape(-1) for t in ts]) for ts in per_replica]).mean(0)
    numels = [t.numel() for t in per_replica[0]]
    for ts in per_replica:
        for t, v in zip(ts, flat.split(numels), strict=True):
            t.copy_(v.view_as(t))


def plain_run(job: Job, method: str, steps: int, period: int) -> list[tuple[float, float]]:
    """``steps`` steps of ``job``'s K replicas in one plain loop; (wall, process CPU) stamps at the end of each step,
    taken where the engine's observer stamps its own (after all K replicas finished the step)."""
    k, batch = job.world_size, job.batch_sizes[0]
    base = job.make_model()
    models = [copy.deepcopy(base) for _ in range(k)]
    opts = [torch.optim.SGD(m.parameters(), lr=LR, momentum=MOMENTUM) for m in models]
    params = [list(m.parameters()) for m in models]
    x, y = job.bundle.train_tensors
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    shards = [_Shard(x, y, s, batch, r) for r, s in enumerate(perm.chunk(k))]
    loss_sum = 0.0
    stamps: list[tuple[float, float]] = []
    for step in range(steps):
        for r in range(k):
            xb, yb = shards[r].next()
            models[r].zero_grad(set_to_none=True)
            loss = F.cross_entropy(models[r](xb), yb)
            loss.backward()
            loss_sum += loss.item()
            if method == "local_sgd":
                opts[r].step()
        if method == "ar_sgd":
            average([[p.grad for p in ps] for ps in params])
            for opt in opts:
                opt.step()
        elif (step + 1) % period == 0:
            average([[p.data for p in ps] for ps in params])
        stamps.append((time.perf_counter(), time.process_time()))
    return stamps
