"""Splitting a training set among workers (the two ``Allocation.partition`` kinds of ``distrepro.api.method``).

``iid_shards`` gives every worker a disjoint random shard whose size follows the method's share:
heterogeneity-aware methods (CAdp, ...) hand a fast worker more data, so shard sizes are unequal
and must still add up to exactly the dataset size, which is why sizes are rounded by the largest
remainder method instead of independently. ``full_shuffle`` lets every worker stream the whole
set in its own order (the reshuffling happens in :class:`distrepro.engine.streams.WorkerStream`).

Shards are drawn from a caller-supplied ``torch.Generator`` (derived with ``distrepro.seeding``) so
that the same run always partitions the same way, and every rank can recompute the partition
without communication.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

#: tolerance on ``sum(shares) == 1`` (same as ``distrepro.api.method.Allocation``)
SHARE_TOLERANCE = 1e-6


def _check_n(n: int) -> None:
    if isinstance(n, bool) or int(n) != n or n < 0:
        raise ValueError(f"the dataset size n must be a non-negative integer, got {n!r}")


def shard_sizes(n: int, shares: Sequence[float]) -> list[int]:
    """Shard sizes for ``shares`` of ``n`` items, by largest-remainder (Hamilton) rounding.

    Every worker first gets ``floor(share·n)``; the items left over go one each to the workers
    with the largest fractional parts (ties: lower rank first). The sizes sum to exactly ``n``,
    each is within one of its exact quota, and a zero share always gets an empty shard.
    Shares are renormalised to sum to 1 first, so a sum that is off by float round-off cannot
    create or lose an item.
    """
    _check_n(n)
    shares = [float(s) for s in shares]
    if not shares:
        raise ValueError("shares must not be empty")
    if any(math.isnan(s) or math.isinf(s) or s < 0 for s in shares):
        raise ValueError(f"shares must be finite and >= 0, got {shares}")
    total = math.fsum(shares)
    if abs(total - 1.0) > SHARE_TOLERANCE:
        raise ValueError(f"shares must sum to 1 (within {SHARE_TOLERANCE}), got sum {total!r} for {shares}")
    quotas = [s / total * n for s in shares]
    sizes = [min(math.floor(q), n) for q in quotas]
    left = n - sum(sizes)
    # Zero shares are excluded from the remainder by sorting them last (and they have no fraction).
    order = sorted(
        range(len(shares)),
        key=lambda j: (shares[j] == 0.0, -(quotas[j] - sizes[j]), j),
    )
    for j in order[:left]:
        sizes[j] += 1
    return sizes


def iid_shards(n: int, shares: Sequence[float], generator: torch.Generator) -> list[torch.Tensor]:
    """Disjoint random shards of ``range(n)``, shard ``j`` holding ``shard_sizes(n, shares)[j]`` indices.

    One random permutation of ``range(n)`` is drawn from ``generator`` and cut into consecutive
    pieces; the shards are therefore disjoint and together cover every index exactly once.
    Returns int64 tensors (a worker with share 0 gets an empty one).
    """
    sizes = shard_sizes(n, shares)
    perm = torch.randperm(n, generator=generator)
    return [piece.clone() for piece in torch.split(perm, sizes)]


def full_shuffle(n: int, world_size: int) -> list[torch.Tensor]:
    """Every worker gets all of ``range(n)``; each worker's stream shuffles it in its own order."""
    _check_n(n)
    if isinstance(world_size, bool) or int(world_size) != world_size or world_size < 1:
        raise ValueError(f"world_size must be a positive integer, got {world_size!r}")
    return [torch.arange(n, dtype=torch.int64) for _ in range(world_size)]
