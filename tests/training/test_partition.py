"""Partitioning the training set among workers: exact sizes, disjoint shards, clear errors."""

from __future__ import annotations

import pytest
import torch

from distrepro.api.method import Allocation
from distrepro.seeding import generator
from distrepro.training.partition import full_shuffle, iid_shards, shard_sizes

pytestmark = pytest.mark.smoke


@pytest.mark.parametrize(
    ("n", "shares", "expected"),
    [
        (10, [0.5, 0.5], [5, 5]),
        # quotas 3.33 each: the one left-over item goes to the lowest rank on a tie
        (10, [1 / 3, 1 / 3, 1 / 3], [4, 3, 3]),
        # quotas 3.5, 1.75, 1.75 -> floors 3, 1, 1; two left over go to the .75 fractions
        (7, [0.5, 0.25, 0.25], [3, 2, 2]),
        # quotas 2.5 x 4: rounding each (half to even) would give 2+2+2+2 = 8, not 10
        (10, [0.25, 0.25, 0.25, 0.25], [3, 3, 2, 2]),
        # a zero share never gets the remainder
        (5, [0.0, 0.5, 0.5], [0, 3, 2]),
        (3, [0.1, 0.0, 0.9], [0, 0, 3]),
        (0, [0.3, 0.7], [0, 0]),
        # 0.7 * 10 is 7.000000000000001 in floating point: still 7, and the sum stays 10
        (10, [0.1, 0.2, 0.7], [1, 2, 7]),
    ],
)
def test_shard_sizes_by_largest_remainder(n: int, shares: list[float], expected: list[int]) -> None:
    assert shard_sizes(n, shares) == expected


def test_shard_sizes_sum_to_n_for_unequal_batch_shares() -> None:
    shares = Allocation.proportional_to_batch([32, 64, 96, 17, 5]).shares
    for n in (1, 999, 50_000, 50_001):
        sizes = shard_sizes(n, shares)
        assert sum(sizes) == n
        assert all(abs(s - share * n) < 1 for s, share in zip(sizes, shares, strict=True))


def test_iid_shards_are_disjoint_and_cover_everything() -> None:
    shares = [0.5, 0.3, 0.0, 0.2]
    shards = iid_shards(101, shares, generator("test", "partition"))
    assert [len(s) for s in shards] == shard_sizes(101, shares) == [51, 30, 0, 20]
    assert all(s.dtype == torch.int64 for s in shards)
    everything = torch.cat(shards)
    assert torch.equal(everything.sort().values, torch.arange(101))
    assert shards[2].numel() == 0
    # random, not contiguous blocks
    assert not torch.equal(shards[0], torch.arange(51))


def test_iid_shards_are_deterministic_in_the_generator() -> None:
    a = iid_shards(50, [0.5, 0.5], generator("run", 0))
    b = iid_shards(50, [0.5, 0.5], generator("run", 0))
    c = iid_shards(50, [0.5, 0.5], generator("run", 1))
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not torch.equal(a[0], c[0])


def test_shares_within_tolerance_are_accepted() -> None:
    assert sum(shard_sizes(1000, [0.5, 0.5 + 5e-7])) == 1000


@pytest.mark.parametrize(
    ("n", "shares", "message"),
    [
        (10, [0.5, 0.6], "sum to 1"),
        (10, [1.2, -0.2], ">= 0"),
        (10, [float("nan"), 1.0], "finite"),
        (10, [], "must not be empty"),
        (-1, [1.0], "non-negative integer"),
        (2.5, [1.0], "non-negative integer"),
    ],
)
def test_bad_inputs_raise_value_error(n: int, shares: list[float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        iid_shards(n, shares, generator("x"))


def test_full_shuffle_gives_everyone_everything() -> None:
    parts = full_shuffle(7, 3)
    assert len(parts) == 3
    assert all(torch.equal(p, torch.arange(7)) for p in parts)
    parts[0][0] = 99  # each worker owns its tensor
    assert int(parts[1][0]) == 0
    with pytest.raises(ValueError, match="world_size"):
        full_shuffle(7, 0)
    with pytest.raises(ValueError, match="non-negative"):
        full_shuffle(-3, 2)
