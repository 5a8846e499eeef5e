"""Pieces every engine needs: data streams from an allocation, the time-to-target tracker."""

from __future__ import annotations

from dataclasses import dataclass

from distrepro.api.method import Allocation, Batch
from distrepro.config.run_config import Target
from distrepro.engine.partition import full_shuffle, iid_shards
from distrepro.engine.streams import WorkerStream
from distrepro.seeding import generator
from distrepro.spec.job import Job


class EmptyStream:
    """A worker allocated no data still takes part in every step (lockstep methods)."""

    def __init__(self, like: Batch) -> None:
        self._batch = Batch(like.inputs[:0], like.targets[:0])

    def next_batch(self) -> Batch:
        return self._batch

    def state_dict(self) -> dict[str, object]:
        return {}  # nothing moves: a checkpoint needs only to know it is one

    def load_state_dict(self, state: dict[str, object]) -> None:
        pass


def make_stream(job: Job, alloc: Allocation, epoch: int, rank: int) -> WorkerStream | EmptyStream:
    """Rank ``rank``'s data stream under ``alloc`` (shards re-drawn per allocation epoch).

    Every rank computes the same partition from the same derived seed, so the distributed
    engine needs no communication to agree on it.
    """
    k = job.world_size
    if len(alloc.shares) != k:
        raise ValueError(f"{job.method.name}.allocate returned {len(alloc.shares)} shares for {k} workers")
    n = len(job.bundle.train)
    if alloc.partition == "iid_shards":
        shards = iid_shards(n, alloc.shares, generator(*job.seed_parts, "partition", epoch))
    else:
        shards = full_shuffle(n, k)
    b = alloc.batch_sizes[rank]
    if b == 0 or len(shards[rank]) == 0:
        return EmptyStream(job.example_batch)
    return WorkerStream(job.bundle, shards[rank], b, (*job.seed_parts, "rank", rank, "data"))


@dataclass
class TargetTracker:
    """Records the first evaluation at which the quality target is reached."""

    target: Target | None
    time_s: float | None = None
    step: int | None = None

    def update(self, metrics: dict[str, float], emulated_s: float, step: int) -> None:
        if self.target is None or self.time_s is not None:
            return
        value = metrics[self.target.metric]
        hit = value >= self.target.value if self.target.direction == "max" else value <= self.target.value
        if hit:
            self.time_s, self.step = emulated_s, step
