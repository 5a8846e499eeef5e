"""Worker streams: endless, reshuffled per pass, deterministic, and the same on both data paths."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import torch
from torch.utils.data import Dataset

from distrepro.api.method import Batch
from distrepro.data.loading import DatasetBundle
from distrepro.engine.streams import WorkerStream, iterate_eval
from distrepro.seeding import generator

pytestmark = pytest.mark.smoke

N_TRAIN, N_TEST = 20, 7


class ItemDataset(Dataset[Any]):
    """Sample ``i`` is a 1×2×2 image filled with ``i`` and label ``i % 3`` (a plain int)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return torch.full((1, 2, 2), float(i)), i % 3


class ExplodingDataset(ItemDataset):
    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        raise AssertionError("the tensor fast path must not read items one by one")


def tensors(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.arange(n, dtype=torch.float32).view(n, 1, 1, 1).expand(n, 1, 2, 2).clone(), torch.arange(n) % 3


def bundle(fast: bool) -> DatasetBundle:
    if fast:
        return DatasetBundle(
            "toy", ExplodingDataset(N_TRAIN), ExplodingDataset(N_TEST), 3, (1, 2, 2), tensors(N_TRAIN), tensors(N_TEST)
        )
    return DatasetBundle("toy", ItemDataset(N_TRAIN), ItemDataset(N_TEST), 3, (1, 2, 2))


def ids(batch: Batch) -> list[int]:
    """The sample ids of a batch (each image is filled with its id)."""
    return [int(v) for v in batch.inputs[:, 0, 0, 0]]


def test_same_seed_parts_same_batches_on_both_paths() -> None:
    idx = torch.arange(0, 20, 2)
    fast = WorkerStream(bundle(True), idx, 4, ("run", 0, "rank", 1))
    fast_again = WorkerStream(bundle(True), idx, 4, ("run", 0, "rank", 1))
    slow = WorkerStream(bundle(False), idx, 4, ("run", 0, "rank", 1))
    other = WorkerStream(bundle(True), idx, 4, ("run", 0, "rank", 2))
    a = [fast.next_batch() for _ in range(8)]
    b = [fast_again.next_batch() for _ in range(8)]
    c = [slow.next_batch() for _ in range(8)]
    d = [other.next_batch() for _ in range(8)]
    for x, y, z in zip(a, b, c, strict=True):
        assert torch.equal(x.inputs, y.inputs) and torch.equal(x.targets, y.targets)
        assert torch.equal(x.inputs, z.inputs) and torch.equal(x.targets, z.targets)
        assert x.targets.dtype == z.targets.dtype == torch.int64
        assert x.targets.tolist() == [i % 3 for i in ids(x)]
    assert [ids(x) for x in a] != [ids(x) for x in d]


def test_passes_are_permutations_and_batches_wrap_around() -> None:
    idx = torch.tensor([3, 5, 7, 11, 13, 17, 19, 2, 4, 6])
    parts = ("wrap", 0)
    stream = WorkerStream(bundle(True), idx, 4, parts)
    drawn = [i for _ in range(3) for i in ids(stream.next_batch())]  # 12 samples: pass 0 + 2 of pass 1
    assert stream.passes_started == 2
    pass0 = idx[torch.randperm(10, generator=generator(*parts, "pass", 0))].tolist()
    pass1 = idx[torch.randperm(10, generator=generator(*parts, "pass", 1))].tolist()
    assert drawn == pass0 + pass1[:2]
    assert pass0 != pass1  # every pass is reshuffled


def test_batch_larger_than_the_index_set_spans_passes() -> None:
    stream = WorkerStream(bundle(True), torch.tensor([1, 2, 3]), 8, ("big",))
    batch = stream.next_batch()
    assert len(batch) == 8
    counts = Counter(ids(batch))
    assert set(counts) == {1, 2, 3} and min(counts.values()) >= 2  # passes 0 and 1 whole, 2 started
    assert stream.passes_started == 3


def test_set_batch_size() -> None:
    stream = WorkerStream(bundle(False), torch.arange(10), 3, ("bs",))
    assert len(stream.next_batch()) == 3
    stream.set_batch_size(5)
    assert stream.batch_size == 5 and len(stream.next_batch()) == 5
    stream.set_batch_size(0)
    with pytest.raises(ValueError, match="batch_size 0"):
        stream.next_batch()
    with pytest.raises(ValueError, match="non-negative"):
        stream.set_batch_size(-1)


def test_set_indices_restarts_the_pass_on_the_new_set() -> None:
    stream = WorkerStream(bundle(True), torch.arange(10), 4, ("realloc",))
    stream.next_batch()
    assert stream.passes_started == 1
    new = torch.tensor([15, 16, 17, 18, 19])
    stream.set_indices(new)
    batch = stream.next_batch()
    assert set(ids(batch)) <= set(new.tolist())
    assert stream.passes_started == 2
    assert ids(batch) == new[torch.randperm(5, generator=generator("realloc", "pass", 1))].tolist()[:4]


def test_bad_indices_and_empty_sets() -> None:
    with pytest.raises(ValueError, match="out of range"):
        WorkerStream(bundle(True), torch.tensor([0, N_TRAIN]), 2, ("x",))
    with pytest.raises(ValueError, match="1-D integer"):
        WorkerStream(bundle(True), torch.tensor([0.5, 1.0]), 2, ("x",))
    empty = WorkerStream(bundle(True), torch.empty(0, dtype=torch.int64), 2, ("x",))
    with pytest.raises(ValueError, match="empty index set"):
        empty.next_batch()


@pytest.mark.parametrize("fast", [True, False])
def test_iterate_eval_covers_the_test_split_in_order(fast: bool) -> None:
    batches = list(iterate_eval(bundle(fast), 3))
    assert [len(b) for b in batches] == [3, 3, 1]
    assert [i for b in batches for i in ids(b)] == list(range(N_TEST))
    assert torch.cat([b.targets for b in batches]).tolist() == [i % 3 for i in range(N_TEST)]
    with pytest.raises(ValueError, match="positive"):
        next(iterate_eval(bundle(fast), 0))
