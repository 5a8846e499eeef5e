"""In-process gossip agents (:mod:`distrepro.engine.inprocess.agent`) on hand-computed cases.

One GPU per node, 1 GB/s NICs, no latency (``lanenet``); each worker's vector is one number, charged as
``SECONDS`` GB so one exchange takes ``SECONDS`` s. The endpoint averages (x ← (x + peer)/2) and logs
``(time, peer)``; a "gradient step" adds a per-rank constant at the end of each computation.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
from lanenet import G, Net

from distrepro.engine.clock import VirtualClock
from distrepro.engine.inprocess.comm import InProcessComm

pytestmark = pytest.mark.smoke


class Endpoint:
    def __init__(self, x: float, neighbors: Sequence[int]) -> None:
        self.x = torch.tensor([x], dtype=torch.float32)
        self.neighbors = list(neighbors)
        self.log: list[tuple[float, int]] = []

    def candidates(self) -> Sequence[int]:
        return self.neighbors

    def snapshot(self) -> torch.Tensor:
        return self.x.clone()

    def receive(self, t: float, peer: int, vector: torch.Tensor) -> None:
        self.x = (self.x + vector) / 2
        self.log.append((t, peer))


def _run(
    tmp_path: Path,
    seconds: float,
    plan: dict[int, dict[str, Any]],
) -> tuple[dict[int, Endpoint], dict[int, Any], list[VirtualClock]]:
    """``plan[rank]``: x, neighbors, compute (s per step), steps, step (added to x per gradient), quota."""
    net = Net(tmp_path, len(plan), bytes_scale=seconds * G / 4)  # one float32 = 4 bytes → ``seconds`` s
    ends = {r: Endpoint(p["x"], p["neighbors"]) for r, p in plan.items()}

    def body(rank: int, comm: InProcessComm, clock: VirtualClock) -> Any:
        p, end = plan[rank], ends[rank]
        agent = comm.gossip_agent(p["neighbors"], end)
        assert agent is not None
        done = []
        if p["steps"]:
            agent.start(p["quota"])
        for _ in range(p["steps"]):
            clock.compute(p["compute"])
            agent.sync()
            end.x += p.get("step", 0.0)
            done.append(agent.barrier(p["quota"]))
        agent.close()
        return done

    out = net.run(body)
    return ends, out, net.clocks


def test_exchanges_run_during_computation_and_the_barrier_waits_for_the_quota(tmp_path: Path) -> None:
    """Rank 0 computes 1 s per gradient (2 gradients, +1 each), rank 1 3 s (1 gradient, +10); x = 0 and 1;
    one averaging per interval, 0.5 s each.

    t=0: both announce, pair; the swap runs 0 → 0.5 during both computations: x = 0.5, 0.5 (applied before
    rank 0's step at 1: x0 = 1.5, the Hogwild order). Rank 0's quota is done at 1: no wait; it owes the next
    one, but rank 1 owes nothing until its gradient ends at 3. Rank 0's second gradient ends at 2 (x0 = 2.5)
    and waits: idle 2 → 3. At 3 rank 1 steps (x1 = 10.5), its barrier opens and it pairs with rank 0: swap
    3 → 3.5 of 2.5 and 10.5: both 6.5. Rank 0: communication 3 → 3.5, then done. Rank 1 closes at 3 and waits
    for the exchange in flight (communication 3 → 3.5)."""
    ends, out, clocks = _run(
        tmp_path,
        0.5,
        {
            0: {"x": 0.0, "neighbors": [1], "compute": 1.0, "steps": 2, "step": 1.0, "quota": 1},
            1: {"x": 1.0, "neighbors": [0], "compute": 3.0, "steps": 1, "step": 10.0, "quota": 1},
        },
    )
    assert ends[0].log == [(0.5, 1), (3.5, 1)] and ends[1].log == [(0.5, 0), (3.5, 0)]
    assert ends[0].x.item() == ends[1].x.item() == 6.5
    assert out == {0: [1, 1], 1: [1]}
    (c0, c1) = clocks
    assert (c0.t, c0.compute_s, c0.idle_s, c0.comm_s) == pytest.approx((3.5, 2.0, 1.0, 0.5))
    assert (c1.t, c1.compute_s, c1.idle_s, c1.comm_s) == pytest.approx((3.5, 3.0, 0.0, 0.5))


def test_two_averagings_per_interval_go_to_two_different_neighbours(tmp_path: Path) -> None:
    """Ring of 4, quota 2, 0.1 s per swap, 1 s gradients. t=0: rank 0 waits, rank 1 pairs with it, rank 2
    waits, rank 3 pairs with it. At 0.1 both swaps end (0-1 handled first): 0 and 1 may not pair again
    while they have another neighbour, so they wait; then 2 pairs with the waiting 1 and 3 with 0; those end at
    0.2, quota done, nobody waits at the barrier."""
    ring = {r: [(r - 1) % 4, (r + 1) % 4] for r in range(4)}
    plan = {r: {"x": float(r), "neighbors": ring[r], "compute": 1.0, "steps": 1, "quota": 2} for r in range(4)}
    ends, out, clocks = _run(tmp_path, 0.1, plan)
    assert [[p for _, p in ends[r].log] for r in range(4)] == [[1, 3], [0, 2], [3, 1], [2, 0]]
    assert all([t for t, _ in ends[r].log] == pytest.approx([0.1, 0.2]) for r in range(4))
    assert out == {r: [2] for r in range(4)}
    assert [c.idle_s for c in clocks] == [0.0] * 4 and [c.t for c in clocks] == [1.0] * 4
    # 0,1 → 0.5; 2,3 → 2.5; then 1,2 → 1.5 and 0,3 → 1.5: the ring's mean (1.5) everywhere
    assert [ends[r].x.item() for r in range(4)] == [1.5] * 4


def test_a_worker_whose_neighbours_have_all_left_stops_owing(tmp_path: Path) -> None:
    """Rank 1 trains no step and closes at once: rank 0, with nobody left, owes nothing and never waits."""
    ends, out, clocks = _run(
        tmp_path,
        0.5,
        {
            0: {"x": 0.0, "neighbors": [1], "compute": 1.0, "steps": 2, "quota": 1},
            1: {"x": 1.0, "neighbors": [0], "compute": 1.0, "steps": 0, "quota": 1},
        },
    )
    assert out[0] == [0, 0] and ends[0].log == []
    assert (clocks[0].t, clocks[0].idle_s, clocks[0].comm_s) == (2.0, 0.0, 0.0)


def test_a_second_agent_or_a_bad_neighbour_is_refused(tmp_path: Path) -> None:
    net = Net(tmp_path, 2)
    comm = net.fabric.comms[0]
    with pytest.raises(ValueError, match="invalid gossip neighbours"):
        comm.gossip_agent([0], Endpoint(0.0, [0]))
    comm.gossip_agent([1], Endpoint(0.0, [1]))
    with pytest.raises(Exception, match="second gossip agent"):
        comm.gossip_agent([1], Endpoint(0.0, [1]))


def test_a_quota_nobody_can_serve_is_dropped_instead_of_deadlocking(tmp_path: Path) -> None:
    """Rank 1 never gossips and waits in a collective for rank 0, which waits at its gossip barrier for rank 1:
    every worker waits. The agent drops rank 0's quota (as a pairing with nobody left gives up), the barrier
    opens at rank 0's own time (1 s, no idle) and both go on to the collective."""
    net = Net(tmp_path, 2)

    def body(rank: int, comm: InProcessComm, clock: VirtualClock) -> Any:
        agent = comm.gossip_agent([1 - rank], Endpoint(0.0, [1 - rank]))
        done = None
        if rank == 0:
            agent.start(1)
            clock.compute(1.0)
            done = agent.barrier(1)
        comm.barrier()
        return done

    out = net.run(body)
    assert out == {0: 0, 1: None}
    assert (net.clocks[0].t, net.clocks[0].idle_s) == (1.0, 0.0)
