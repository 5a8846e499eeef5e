"""Every rank's data stream, drawn from one partition for all ranks, is the stream each rank drew for itself."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from distrepro.api.method import Allocation
from distrepro.config.run_config import validate_config
from distrepro.engine.run_setup import EmptyStream, make_stream, make_streams
from distrepro.engine.streams import WorkerStream
from distrepro.job.resolve import Job, build_job
from distrepro.seeding import generator
from distrepro.training.partition import full_shuffle, iid_shards

pytestmark = pytest.mark.smoke


@pytest.fixture(scope="module")
def job() -> Job:
    cfg = validate_config(
        {
            "method": "ar_sgd",
            "profile": "cadp-ijcai25",
            "dataset": {"name": "synthetic", "params": {"train_size": 203, "test_size": 8, "image_size": 8}},
            "model": {"name": "small_cnn", "params": {"hidden": 4}},
            "batch_size": 5,
            "budget": {"steps": 1},
        }
    )
    return build_job(cfg, 0)


def reference_stream(job: Job, alloc: Allocation, epoch: int, rank: int) -> WorkerStream | EmptyStream:
    """One rank's stream as it was drawn before: the whole partition drawn again for this rank alone."""
    n = len(job.bundle.train)
    if alloc.partition == "iid_shards":
        shards = iid_shards(n, alloc.shares, generator(*job.seed_parts, "partition", epoch))
    else:
        shards = full_shuffle(n, job.world_size)
    b = alloc.batch_sizes[rank]
    if b == 0 or len(shards[rank]) == 0:
        return EmptyStream(job.example_batch)
    return WorkerStream(job.bundle, shards[rank], b, (*job.seed_parts, "rank", rank, "data"))


def draws(stream: WorkerStream | EmptyStream, n: int = 3) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(b.inputs, b.targets) for b in (stream.next_batch() for _ in range(n))]


def allocations(job: Job) -> list[Allocation]:
    equal = job.allocate(0)
    k = job.world_size
    shares = [0.3, 0.0, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1]  # unequal, one worker without data
    uneven = dataclasses.replace(equal, shares=tuple(shares), batch_sizes=tuple([5, 0, 3, 2, 2, 2, 2, 1]))
    whole = dataclasses.replace(equal, partition="full_shuffle")
    assert k == len(shares)
    return [equal, uneven, whole]


@pytest.mark.parametrize("which", [0, 1, 2], ids=["equal", "uneven", "full_shuffle"])
@pytest.mark.parametrize("epoch", [0, 3])
def test_streams_of_all_ranks_are_each_ranks_own_bit_for_bit(job: Job, which: int, epoch: int) -> None:
    alloc = allocations(job)[which]
    ranks = list(range(job.world_size))
    together = make_streams(job, alloc, epoch, ranks)
    for rank, stream in zip(ranks, together, strict=True):
        ref = reference_stream(job, alloc, epoch, rank)
        assert type(stream) is type(ref)
        if isinstance(ref, WorkerStream):
            assert torch.equal(stream.indices, ref.indices)
        for (x, y), (rx, ry) in zip(draws(stream), draws(ref), strict=True):
            assert torch.equal(x, rx) and torch.equal(y, ry)
        alone = make_stream(job, alloc, epoch, rank)  # what a rank of the distributed engine asks for
        assert type(alone) is type(ref) and all(
            torch.equal(x, rx)
            for (x, _), (rx, _) in zip(draws(alone), draws(reference_stream(job, alloc, epoch, rank)), strict=True)
        )


def test_a_subset_of_ranks_in_any_order(job: Job) -> None:
    alloc = allocations(job)[1]
    picked = make_streams(job, alloc, 0, [4, 0, 2])
    assert [s.indices.tolist() for s in picked] == [make_stream(job, alloc, 0, r).indices.tolist() for r in (4, 0, 2)]


def test_wrong_number_of_shares_is_refused(job: Job) -> None:
    alloc = dataclasses.replace(job.allocate(0), shares=(1.0,), batch_sizes=(5,))
    with pytest.raises(ValueError, match="returned 1 shares for 8 workers"):
        make_streams(job, alloc, 0, [0])
