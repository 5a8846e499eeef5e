"""The cases of ``benchmarks/shaped_links.py`` and what the emulator predicts each one takes.

Why a module of its own: ``shaped_links.py`` runs real gloo ranks in rate-limited namespaces (root only,
:mod:`shaped_ranks`) and is the command; what it runs (a node layout and its operations: :class:`Case`,
:class:`Op`, :func:`cases`) and the emulator's price of it (:func:`emulated_profile`, :func:`predict`) need no
root, no namespace and no process, so the tests check the prediction side everywhere from this alone.

The prediction's inputs: the link bandwidth is the htb rate times the TCP goodput of a full frame
(:data:`GOODPUT`) [D]; the per-message latency α is measured by the caller in the same run [L]; the intra-node
(loopback) bandwidth is an estimate (:data:`LOOPBACK_GBYTES_PER_S`) [E].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: TCP payload per full Ethernet frame: MSS 1448 (1500 MTU - 20 IP - 20 TCP - 12 timestamp option) in 1514 bytes
GOODPUT = 1448 / 1514
#: loopback bandwidth inside one namespace (the intra-node link) [E]: memcpy-bound TCP on a shared 2-core VM
LOOPBACK_GBYTES_PER_S = 2.0


@dataclass(frozen=True)
class Op:
    """One timed operation: ``all_reduce`` over every rank, concurrent ``pairs`` exchanging ``nbytes`` each way, or
    ``send``: the first rank of each pair sends ``nbytes`` to the second (one direction only).

    ``recv_first``: a pair's ``batch_isend_irecv`` lists its receive before its send, as the engine's
    ``Comm.exchange`` does (``distrepro/engine/multiprocess/peer.py``, *receive_first_swap*: gloo moves a payload
    only after the peer's "ready to receive" notice, which it queues behind what the rank already queued, so posted
    send first the two directions take turns). False: the order the engine used before, for the comparison."""

    name: str
    kind: str
    nbytes: int
    pairs: tuple[tuple[int, int], ...] = ()
    recv_first: bool = True


@dataclass(frozen=True)
class Case:
    """A node layout (ranks per node, ranks numbered node by node) and the operations run on it."""

    layout: tuple[int, ...]
    ops: tuple[Op, ...]

    @property
    def world(self) -> int:
        return sum(self.layout)

    def node_of(self, rank: int) -> int:
        edge = 0
        for node, count in enumerate(self.layout):
            edge += count
            if rank < edge:
                return node
        raise ValueError(f"rank {rank} outside layout {self.layout}")


def cases(nbytes: int, quick: bool = False, swaps_only: bool = False) -> list[Case]:
    """The benchmark's cases; ``quick``: one two-node ring, for the test suite; ``swaps_only``: the pair
    exchanges alone, each also with the send posted first (:class:`Op`)."""
    if quick:
        return [Case((1, 1), (Op("ring p=2", "all_reduce", nbytes),))]
    if swaps_only:
        swaps = []
        for case in cases(nbytes):
            ops = [op for op in case.ops if op.kind == "pairs"]
            ops += [Op(f"{op.name}, send first", op.kind, op.nbytes, op.pairs, False) for op in ops]
            swaps.append(Case(case.layout, tuple(ops)))
        return swaps
    pairs4 = ((0, 1), (2, 3))
    pairs8 = ((0, 1), (2, 3), (4, 5), (6, 7))
    return [
        Case(
            (1, 1),
            (
                Op("ring p=2", "all_reduce", nbytes),
                Op("one-way send", "send", nbytes, ((0, 1),)),
                Op("shared NIC m=1", "pairs", nbytes, ((0, 1),)),
            ),
        ),
        Case((1,) * 4, (Op("ring p=4", "all_reduce", nbytes), Op("gossip pairs p=4", "pairs", nbytes, pairs4))),
        Case((1,) * 8, (Op("ring p=8", "all_reduce", nbytes), Op("gossip pairs p=8", "pairs", nbytes, pairs8))),
        Case(
            (2, 2),
            (
                Op("hierarchical 2x2 all-reduce", "all_reduce", nbytes),
                Op("shared NIC m=2", "pairs", nbytes, ((0, 2), (1, 3))),
            ),
        ),
        Case(
            (4, 4),
            (
                Op("hierarchical 2x4 all-reduce", "all_reduce", nbytes),
                Op("shared NIC m=4", "pairs", nbytes, ((0, 4), (1, 5), (2, 6), (3, 7))),
            ),
        ),
    ]


def emulated_profile(layout: tuple[int, ...], rate_mbit: float | None, latency_s: float) -> Any:
    """A profile of the shaped network: one node per namespace, its NIC at the htb rate's TCP goodput."""
    from distrepro.hardware.profiles import HardwareProfile

    unshaped = rate_mbit is None
    nic_gbytes = LOOPBACK_GBYTES_PER_S if unshaped else rate_mbit * 1e6 / 8 * GOODPUT / 1e9
    nic = {
        "latency_us": latency_s * 1e6,
        "bandwidth_gbytes_per_s": nic_gbytes,
        "source": "[D] htb rate x 1448/1514 TCP goodput; [L] latency: 8-byte gloo all-reduce between two namespaces",
    }
    nodes = [
        {
            "name": f"ns{i}",
            "nic": nic,
            "devices": [
                {
                    "name": "cpu-rank",
                    "kind": "cpu",
                    "count": count,
                    "memory_gib": 1,
                    "effective_flops_per_s": 1e9,
                    "source": "[L] a gloo rank in a network namespace",
                }
            ],
        }
        for i, count in enumerate(layout)
    ]
    return HardwareProfile.model_validate(
        {
            "schema_version": 2,
            "name": "shaped-links",
            "description": "namespaces on a bridge, htb-shaped veths (benchmarks/shaped_links.py)",
            "nodes": nodes,
            "network": {
                "intra_node": {
                    "latency_us": latency_s * 1e6,
                    "bandwidth_gbytes_per_s": LOOPBACK_GBYTES_PER_S,
                    "source": "[E] loopback TCP inside one namespace",
                },
                "inter_node": nic,
            },
            "collective_algorithm": "ring",
        }
    )


def predict(case: Case, op: Op, rate_mbit: float | None, latency_s: float, algorithm: str = "ring") -> float:
    """The emulator's seconds for ``op`` on ``case``'s layout at ``rate_mbit`` (noise-free)."""
    from distrepro.timing.network import Paths, simulate
    from distrepro.timing.timemodel import CommCostModel

    profile = emulated_profile(case.layout, rate_mbit, latency_s)
    if op.kind == "all_reduce":
        ranks = range(case.world)
        return CommCostModel(profile).collective("all_reduce", ranks, op.nbytes, algorithm=algorithm).seconds
    if op.kind == "send":  # one message each way of a pair: α + S/B (Hockney)
        return max(CommCostModel(profile).p2p(a, b, op.nbytes) for a, b in op.pairs)
    paths = Paths(profile)
    cost = CommCostModel(profile)
    flows = []
    for a, b in op.pairs:
        # a swap as the in-process engine runs it: S each way over both directions of the pair's path at once
        cap, uses = paths.of(((a, b), (b, a)))
        data_s = cost.exchange(a, b, op.nbytes) - profile.link(a, b).latency_s
        flows.append((0.0, data_s * cap, cap, uses))
    ends = simulate(flows, paths.capacity)
    return max(ends) + max(profile.link(a, b).latency_s for a, b in op.pairs)
