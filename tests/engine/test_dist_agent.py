"""The dist engine's gossip agent (:mod:`distrepro.engine.multiprocess.agent`) and the coordinator's agent rules
(:mod:`distrepro.engine.multiprocess.pairing`),
in one process: agents are real threads, the coordinator a real thread on
an in-memory c10d store, exchanges swap through queues; each "gradient" really sleeps while the agent works.

Each worker's vector is one number; the endpoint (the in-process agent tests') averages (x ← (x + peer)/2) and
logs ``(time, peer)``; a "gradient step" adds a per-rank constant. Virtual times are hand-computed (the
in-process agent's case in ``tests/engine/test_gossip_agent.py``, which the dist agent must reproduce).
"""

from __future__ import annotations

import json
import queue
import threading
import time
from typing import Any

import pytest
import torch
import torch.distributed as dist
from test_gossip_agent import Endpoint

from distrepro.engine.clock import VirtualClock
from distrepro.engine.multiprocess.agent import DistAgent
from distrepro.engine.multiprocess.pairing import SKIP, PairingClient, PairingCoordinator

pytestmark = pytest.mark.smoke

UNIT = 0.25  # real seconds per virtual second of computation: orders real events as the virtual ones


class Wires:
    """Swaps between threads: one queue per direction of each pair; also who swapped while computing."""

    def __init__(self) -> None:
        self.queues: dict[tuple[int, int], queue.Queue[torch.Tensor]] = {}
        self.lock = threading.Lock()
        self.computing: dict[int, bool] = {}
        self.during_compute: dict[int, int] = {}

    def _q(self, a: int, b: int) -> queue.Queue[torch.Tensor]:
        with self.lock:
            return self.queues.setdefault((a, b), queue.Queue())

    def swap_for(self, me: int) -> Any:
        def swap(peer: int, vector: torch.Tensor) -> torch.Tensor:
            if self.computing.get(me):
                self.during_compute[me] = self.during_compute.get(me, 0) + 1
            self._q(me, peer).put(vector.clone())
            return self._q(peer, me).get(timeout=20)

        return swap


def _run(plan: dict[int, dict[str, Any]], seconds: float) -> tuple[dict[int, Endpoint], dict, list, Wires]:
    """``plan[rank]``: x, neighbors, compute (virtual s per gradient), steps, step (added per gradient), quota,
    last_quota (owed after the last gradient; default quota)."""
    store = dist.HashStore()
    world = len(plan)
    coordinator = PairingCoordinator(store, world, timeout_s=20)
    coordinator.start()
    wires = Wires()
    ends = {r: Endpoint(p["x"], p["neighbors"]) for r, p in plan.items()}
    clocks = [VirtualClock(r) for r in range(world)]
    out: dict[int, Any] = {}
    errors: list[BaseException] = []

    def worker(rank: int) -> None:
        try:
            p, end, clock = plan[rank], ends[rank], clocks[rank]
            pairing = PairingClient(store, rank, timeout_s=20)
            agent = DistAgent(
                rank, p["neighbors"], end, clock, pairing, wires.swap_for(rank), lambda peer, v: seconds, 20.0
            )
            done = []
            if p["steps"]:
                wires.computing[rank] = True  # the first gradient starts with the agent
                agent.start(p["quota"])
            for step in range(p["steps"]):
                wires.computing[rank] = True
                time.sleep(p["compute"] * UNIT)
                clock.compute(p["compute"])
                wires.computing[rank] = False
                agent.sync()
                end.x += p.get("step", 0.0)
                last = step == p["steps"] - 1
                done.append(agent.barrier(p.get("last_quota", p["quota"]) if last else p["quota"]))
            agent.close()
            pairing.done()  # the engine says it again at the end of training: once is what counts
            out[rank] = done
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(r,)) for r in plan]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    coordinator.join(5)
    if errors:
        raise errors[0]
    return ends, out, clocks, wires


def test_the_agent_exchanges_while_its_worker_computes_and_times_match_the_in_process_agent() -> None:
    """The in-process agent's first hand-computed case (tests/engine/test_gossip_agent.py): rank 0 computes 1 s per
    gradient (2 gradients, +1 each), rank 1 3 s (1 gradient, +10); x = 0 and 1; quota 1; exchanges 0.5 s.

    t=0: both ask and pair; the swap runs 0 → 0.5 while both compute (really: the agents' threads swap while the
    workers sleep). Rank 0 applies it at its sync at 1 (x0 = 0.5, then 1.5), owes the next one and waits for
    rank 1 from t = 1. Its second gradient ends at 2 (x0 = 2.5): idle 2 → 3. Rank 1 applies the first averaging
    at 3 (x1 = 0.5 → 10.5), pairs with rank 0 at 3: swap 3 → 3.5 of 2.5 and 10.5, both 6.5. Rank 0:
    communication 3 → 3.5. Rank 1 closes at 3 and completes the exchange in flight: communication 3 → 3.5."""
    ends, out, clocks, wires = _run(
        {
            0: {"x": 0.0, "neighbors": [1], "compute": 1.0, "steps": 2, "step": 1.0, "quota": 1},
            1: {"x": 1.0, "neighbors": [0], "compute": 3.0, "steps": 1, "step": 10.0, "quota": 1},
        },
        seconds=0.5,
    )
    assert wires.during_compute == {0: 1, 1: 1}  # the first swap ran beside both workers' computation
    assert ends[0].log == [(0.5, 1), (3.5, 1)]
    assert ends[1].log == [(0.5, 0), (3.5, 0)]
    assert float(ends[0].x) == float(ends[1].x) == 6.5
    assert out == {0: [1, 1], 1: [1]}
    c0, c1 = clocks
    assert (c0.t, c0.compute_s, c0.idle_s, c0.comm_s) == (3.5, 2.0, 1.0, 0.5)
    assert (c1.t, c1.compute_s, c1.idle_s, c1.comm_s) == (3.5, 3.0, 0.0, 0.5)


def test_a_worker_waits_at_the_barrier_for_its_quota_and_pays_only_the_uncovered_wait() -> None:
    """Both compute 1 s, quota 2, exchanges 0.25 s, nothing owed after the gradient. The first swap (0 → 0.25)
    runs during the computation; the second starts once the first is applied and the step taken, at 1 (the dist
    agent never writes the parameters while the worker computes): 1 → 1.25, communication for both;
    x = (0 + 1)/2 = 0.5 → 1.5 and 2.5 → averaged again: 2."""
    ends, out, clocks, _ = _run(
        {
            0: {"x": 0.0, "neighbors": [1], "compute": 1.0, "steps": 1, "step": 1.0, "quota": 2, "last_quota": 0},
            1: {"x": 1.0, "neighbors": [0], "compute": 1.0, "steps": 1, "step": 2.0, "quota": 2, "last_quota": 0},
        },
        seconds=0.25,
    )
    assert [t for t, _ in ends[0].log] == [0.25, 1.25]
    assert float(ends[0].x) == float(ends[1].x) == pytest.approx((1.5 + 2.5) / 2)
    assert out == {0: [2], 1: [2]}
    for c in clocks:
        assert (c.t, c.compute_s, c.idle_s, c.comm_s) == (1.25, 1.0, 0.0, 0.25)


def test_a_worker_whose_neighbours_finished_stops_owing() -> None:
    """Rank 1 trains for 0 steps and closes at once: rank 0's agent is told "no partner" and its barrier opens
    without an averaging; the run ends instead of waiting for the pairing timeout."""
    ends, out, clocks, _ = _run(
        {
            0: {"x": 0.0, "neighbors": [1], "compute": 1.0, "steps": 2, "step": 1.0, "quota": 1},
            1: {"x": 5.0, "neighbors": [0], "compute": 1.0, "steps": 0, "quota": 1},
        },
        seconds=0.5,
    )
    assert ends[0].log == [] and float(ends[0].x) == 2.0
    assert out[0] == [0, 0]
    assert clocks[0].idle_s == 0.0


# ---------------------------------------------------------------------------- coordinator rules (no threads)
class _DictStore:
    def __init__(self) -> None:
        self.data: dict[str, str] = {}

    def set(self, key: str, value: str) -> None:
        self.data[key] = value

    def answer(self, rank: int, k: int) -> tuple[int, float] | None:
        raw = self.data.get(f"pair/ans/{rank}/{k}")
        return None if raw is None else (json.loads(raw)["peer"], json.loads(raw)["t"])


def test_an_interval_partner_is_avoided_while_another_neighbour_is_left() -> None:
    store = _DictStore()
    coord = PairingCoordinator(store, world_size=3)  # a triangle: 0, 1, 2 all neighbours
    coord.handle({"rank": 1, "k": 0, "neighbours": [0, 2], "t": 1.0})
    coord.handle({"rank": 0, "k": 0, "neighbours": [1, 2], "t": 1.0, "avoid": [1]})  # just averaged with 1
    assert store.answer(0, 0) is None and coord.waiting.keys() == {0, 1}
    coord.handle({"rank": 2, "k": 0, "neighbours": [0, 1], "t": 2.0})
    assert store.answer(2, 0) == (0, 2.0) and store.answer(0, 0) == (2, 2.0)
    coord.handle({"rank": 2, "done": True})  # 0's next request avoids 1, but 1 is now its only live neighbour
    coord.handle({"rank": 0, "k": 1, "neighbours": [1, 2], "t": 3.0, "avoid": [1, 2]})
    assert store.answer(0, 1) == (1, 3.0) and store.answer(1, 0) == (0, 3.0)


def test_when_every_worker_is_parked_and_waiting_the_avoidances_lapse() -> None:
    """A ring of 4 where each avoids one neighbour so that no pair is allowed (0 avoids 1, 1 avoids 2, 2 avoids 3,
    3 avoids 0). Nothing happens while a worker computes (it may still come); once all four are parked and
    waiting, the avoidances lapse and they pair in rank order: 0 with 1, then 2 with 3."""
    store = _DictStore()
    coord = PairingCoordinator(store, world_size=4)
    ring = {0: [1, 3], 1: [0, 2], 2: [1, 3], 3: [2, 0]}
    avoid = {0: [1], 1: [2], 2: [3], 3: [0]}
    for r in (0, 1, 2, 3):
        coord.handle({"rank": r, "k": 0, "neighbours": ring[r], "t": float(r), "avoid": avoid[r]})
    for r in (0, 1, 2):
        coord.handle({"rank": r, "parked": True})
    assert coord.waiting.keys() == {0, 1, 2, 3} and not store.data  # rank 3 still computes
    coord.handle({"rank": 3, "parked": True})
    assert store.answer(0, 0) == (1, 1.0) and store.answer(1, 0) == (0, 1.0)
    assert store.answer(2, 0) == (3, 3.0) and store.answer(3, 0) == (2, 3.0)


def test_when_no_pair_can_form_even_so_the_lowest_waiter_skips_its_quota() -> None:
    """Candidates that do not list each other back (a directed triangle, as a custom endpoint might give): all
    parked and waiting, no pair forms, so rank 0 is told to skip its interval's quota; the others wait on."""
    store = _DictStore()
    coord = PairingCoordinator(store, world_size=3)
    for r in (0, 1, 2):
        coord.handle({"rank": r, "parked": True})
    for r in (0, 1, 2):
        coord.handle({"rank": r, "k": 0, "neighbours": [(r + 1) % 3], "t": 1.0})
    assert store.answer(0, 0) == (SKIP, 1.0)
    assert coord.waiting.keys() == {1, 2}
    coord.handle({"rank": 0, "parked": False})  # rank 0's barrier opened: it computes again
    assert coord.waiting.keys() == {1, 2} and len(store.data) == 1


def test_a_rank_that_stops_has_its_pending_request_answered_and_later_ones_refused() -> None:
    store = _DictStore()
    coord = PairingCoordinator(store, world_size=2)
    coord.handle({"rank": 0, "k": 0, "neighbours": [1], "t": 1.0})
    coord.handle({"rank": 0, "done": True})
    assert store.answer(0, 0) == (-1, 1.0)
    coord.handle({"rank": 0, "k": 1, "neighbours": [1], "t": 2.0})
    assert store.answer(0, 1) == (-1, 2.0) and not coord.waiting
