"""Decent-DP's time-varying topologies: which ranks average together at each iteration.

Restated from the library's ``decent_dp/topo.py`` (PyPI ``decent-dp`` 0.2.3, repository
``WangZesen/Decent-DP`` at v0.2.3): a topology is a periodic list of *rounds*; in each round the ranks
are partitioned into disjoint groups, and a group averages uniformly (every member keeps ``1/|g|`` of
each member's parameters). The round used at iteration ``t`` is ``rounds[t % period]``.

Why restate rather than import: the plugin runs on the in-process engine, without ``torch.distributed``
and its process groups, and the library's classes need an initialised process group. The equivalence
is tested against the library itself (``tests/test_decentdp_topology.py``).
"""

from __future__ import annotations

import math

#: one round: disjoint groups covering every rank, each a sorted tuple of ranks
Round = tuple[tuple[int, ...], ...]

TOPOLOGIES = ("complete", "ring", "one-peer-exp", "alternating-exp-ring")


def _log2_exact(n: int, what: str) -> int:
    k = round(math.log2(n)) if n > 0 else -1
    if k < 0 or 2**k != n:
        raise ValueError(f"{what} must be a power of two, not {n}")
    return k


def rounds(name: str, world_size: int, local_world_size: int = 1) -> list[Round]:
    """The topology's rounds, in the library's order (groups sorted, as its validation sorts them).

    ``local_world_size`` is the number of ranks per node (the library reads ``LOCAL_WORLD_SIZE``); only
    the alternating exponential ring uses it.
    """
    n = world_size
    if n < 2:
        raise ValueError(f"a topology needs at least two ranks, not {n}")
    if name == "complete":
        return [(tuple(range(n)),)]
    if name == "ring":
        if n % 2:
            raise ValueError(f"the ring topology needs an even world size, not {n}")
        # round 0 pairs (0,1),(2,3),...; round 1 pairs each even i with i-1, i.e. (n-1,0),(1,2),...
        first = tuple(tuple(sorted((i, (i + 1) % n))) for i in range(0, n, 2))
        second = tuple(tuple(sorted((i, (i - 1) % n))) for i in range(0, n, 2))
        return [first, second]
    if name == "one-peer-exp":
        out: list[Round] = []
        for r in range(_log2_exact(n, "the one-peer exponential graph's world size")):
            used = [False] * n
            groups = []
            for j in range(n):  # greedy: j pairs with j + 2^r unless j was taken already
                if not used[j]:
                    peer = (j + 2**r) % n
                    used[j] = used[peer] = True
                    groups.append(tuple(sorted((j, peer))))
            out.append(tuple(groups))
        return out
    if name == "alternating-exp-ring":
        return _aer(n, local_world_size)
    raise ValueError(f"unknown topology {name!r}; known: {', '.join(TOPOLOGIES)}")


def _aer(n: int, local: int) -> list[Round]:
    """Alternating exponential ring: node pairs (j, j + 2^r) over nodes; each r gives two rounds, one where
    the pair's 2L ranks average together (inter-node) and one where each node averages inside (intra-node).
    Which comes first alternates from one node pair to the next (the library's counter ``cnt``), so in any
    round half of the node pairs cross the network."""
    if local < 1 or n % local:
        raise ValueError(f"world size {n} is not a multiple of {local} ranks per node")
    nodes = n // local
    k = round(math.log2(nodes)) if nodes > 0 else 0
    if 2**k != nodes or k < 1:
        raise ValueError(f"the alternating exponential ring needs a power-of-two number of nodes >= 2, not {nodes}")

    def node(j: int) -> tuple[int, ...]:
        return tuple(range(j * local, (j + 1) * local))

    out: list[list[tuple[int, ...]]] = []
    cnt = 0
    for r in range(k):
        first: list[tuple[int, ...]] = []
        second: list[tuple[int, ...]] = []
        used = [False] * nodes
        for j in range(nodes):
            if used[j]:
                continue
            t = (j + 2**r) % nodes
            used[j] = used[t] = True
            both = tuple(sorted(node(j) + node(t)))
            if cnt % 2 == 0:  # inter-node second, intra-node first
                second.append(both)
                first += [node(j), node(t)]
            else:
                first.append(both)
                second += [node(j), node(t)]
            cnt += 1
        out += [first, second]
    return [tuple(rnd) for rnd in out]


def group_of(rnd: Round, rank: int) -> tuple[int, ...]:
    """The group ``rank`` belongs to in a round."""
    for g in rnd:
        if rank in g:
            return g
    raise ValueError(f"rank {rank} is in no group of round {rnd}")


def comm_round(step: int) -> int:
    """Schedule index of the communication launched at the end of iteration ``step`` (1-based).

    The library's ordering, which is surprising: iteration 1 only traces the backward; the first exchange
    (blocking, at the start of iteration 2) uses ``get_edge(1)``; from iteration 2 on, the exchange launched
    in iteration ``k`` uses ``get_edge(k + 1)`` (``_ddp_fn`` reads ``self._step + 1``). So round index 2 is
    never used for communication; the sequence is 1, 3, 4, 5, ... (``decent_dp/ddp.py``, ``forward`` and
    ``_ddp_fn``, v0.2.3). Only the indices' residues modulo the period matter.
    """
    if step < 1:
        raise ValueError(f"iterations are counted from 1, not {step}")
    return 1 if step == 1 else step + 1


def is_partition(rnd: Round, world_size: int) -> bool:
    """Every rank in exactly one group (the library's ``_validate_edges``)."""
    seen = sorted(r for g in rnd for r in g)
    return seen == list(range(world_size))
