"""Pieces every engine needs: data streams from an allocation, the time-to-target tracker."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from distrepro.api.method import Allocation, Batch
from distrepro.config.run_config import Target
from distrepro.engine.streams import WorkerStream
from distrepro.job.resolve import Job
from distrepro.seeding import generator
from distrepro.training.partition import full_shuffle, iid_shards


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


def make_streams(job: Job, alloc: Allocation, epoch: int, ranks: Sequence[int]) -> list[WorkerStream | EmptyStream]:
    """The data streams of ``ranks`` under ``alloc`` (shards re-drawn per allocation epoch), in that order.

    Every rank computes the same partition from the same derived seed, so the distributed engine needs no
    communication to agree on it. The partition is drawn once for all of ``ranks``: the in-process engine asks
    for all K at once, and drawing it per rank was K permutations of the whole set (quadratic in K when the
    dataset grows with K).
    """
    k = job.world_size
    if len(alloc.shares) != k:
        raise ValueError(f"{job.method.name}.allocate returned {len(alloc.shares)} shares for {k} workers")
    n = len(job.bundle.train)
    if alloc.partition == "iid_shards":
        shards = iid_shards(n, alloc.shares, generator(*job.seed_parts, "partition", epoch))
    else:  # every worker streams the whole set (each stream keeps its own copy)
        whole = full_shuffle(n, 1)[0]
        shards = [whole] * k
    out: list[WorkerStream | EmptyStream] = []
    for rank in ranks:
        b = alloc.batch_sizes[rank]
        if b == 0 or len(shards[rank]) == 0:
            out.append(EmptyStream(job.example_batch))
        else:
            out.append(WorkerStream(job.bundle, shards[rank], b, (*job.seed_parts, "rank", rank, "data")))
    return out


def make_stream(job: Job, alloc: Allocation, epoch: int, rank: int) -> WorkerStream | EmptyStream:
    """Rank ``rank``'s data stream under ``alloc`` (see :func:`make_streams`)."""
    return make_streams(job, alloc, epoch, [rank])[0]


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
