"""Time and bytes charged for each communication pattern: one place, used by every engine.

Both the in-process and the torch.distributed ``Comm`` call these, so the two engines charge
exactly the same virtual time and count exactly the same bytes for the same call. ``bytes`` is
the algorithmic volume each member puts on the wire: ring all-reduce 2(p−1)/p·S, ring
all-gather and ring reduce-scatter (p−1)/p·S of the whole vector S, (pipelined) broadcast (p−1)/p·S,
pairwise exchange S, parameter server S pushed per worker (the pull is the server's traffic).

Bytes are whole numbers, rounded once per message here: S is the real payload times the emulated
workload's ``bytes_scale`` (a ratio of sizes) and the ring fractions divide it by p, so the volume
is fractional; summing fractions would log ``8582483974.87`` bytes, and engines that round at
different points would log different totals for the same run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from distrepro.timing.timemodel import CommCostModel

Charge = tuple[float, int]  # (seconds, bytes sent per member)


def payload_bytes(tensors: Sequence[Any]) -> int:
    """Bytes the tensors hold: what a message carrying them weighs before scaling to the emulated workload."""
    return sum(t.numel() * t.element_size() for t in tensors)


def _whole(nbytes: float) -> int:
    """Bytes of one message put on the wire by one member: the nearest whole number."""
    return round(nbytes)


def all_reduce(cost: CommCostModel, ranks: Sequence[int], nbytes: float) -> Charge:
    p = len(ranks)
    return cost.all_reduce(list(ranks), nbytes), _whole(2 * (p - 1) / p * nbytes if p > 1 else 0)


def reduce_scatter(cost: CommCostModel, ranks: Sequence[int], nbytes_total: float) -> Charge:
    p = len(ranks)
    return cost.reduce_scatter(list(ranks), nbytes_total), _whole((p - 1) / p * nbytes_total if p > 1 else 0)


def all_gather(cost: CommCostModel, ranks: Sequence[int], nbytes_per_rank: float) -> Charge:
    p = len(ranks)
    return cost.all_gather(list(ranks), nbytes_per_rank), _whole((p - 1) * nbytes_per_rank if p > 1 else 0)


def broadcast(cost: CommCostModel, ranks: Sequence[int], src: int, nbytes: float) -> Charge:
    p = len(ranks)
    return cost.broadcast(list(ranks), src, nbytes), _whole((p - 1) / p * nbytes if p > 1 else 0)


def parameter_server(cost: CommCostModel, ranks: Sequence[int], nbytes: float) -> Charge:
    return cost.parameter_server(list(ranks), nbytes), _whole(nbytes)


def parameter_server_async(
    cost: CommCostModel, ranks: Sequence[int], nbytes: float, arrivals: Sequence[float]
) -> Charge:
    """The parameter server receiving pushes as they arrive: seconds after the last arrival (see
    :meth:`~distrepro.timing.timemodel.CommCostModel.parameter_server_async`), bytes as :func:`parameter_server`."""
    return cost.parameter_server_async(list(ranks), nbytes, arrivals), _whole(nbytes)


def exchange(cost: CommCostModel, a: int, b: int, nbytes: float) -> Charge:
    return cost.exchange(a, b, nbytes), _whole(nbytes)


def control(cost: CommCostModel, ranks: Sequence[int]) -> Charge:
    return cost.control(list(ranks)), 0


#: patterns :meth:`distrepro.api.method.Comm.charge` accepts (accounting only, no data moved)
PATTERNS = ("all_reduce", "reduce_scatter", "all_gather", "parameter_server")


def by_pattern(cost: CommCostModel, pattern: str, ranks: Sequence[int], nbytes: float) -> Charge:
    """The charge of ``pattern`` on a vector of ``nbytes`` in all (all-gather: the gathered output).

    One entry point for ``Comm.charge`` so both engines map a pattern name to the same formula
    and the same byte convention as the data-moving call of that name.
    """
    if pattern == "all_reduce":
        return all_reduce(cost, ranks, nbytes)
    if pattern == "reduce_scatter":
        return reduce_scatter(cost, ranks, nbytes)
    if pattern == "all_gather":
        return all_gather(cost, ranks, nbytes / len(ranks))
    if pattern == "parameter_server":
        return parameter_server(cost, ranks, nbytes)
    raise ValueError(f"unknown charge pattern {pattern!r}; expected one of {', '.join(PATTERNS)}")
