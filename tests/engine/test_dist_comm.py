"""The distributed engine's non-blocking point-to-point lanes (``distrepro/engine/multiprocess/comm.py``) on real
processes.

``exchange(peer, tensor, async_op=True)`` and ``pair(neighbors, async_op=True)`` must have
``torch.distributed``'s non-blocking semantics, as the collectives do (``nonblocking_probe`` covers
those): the input is taken at issue, the result lands at ``wait()``, the call returns at once (a peer
that needs this rank in a collective before it pairs is not deadlocked), and the ``Work`` carries
virtual ``issue_s <= start_s <= end_s`` with the end at the profile's alpha-beta cost of the exchange.
Four gloo processes, file rendezvous in ``tmp_path``; the profile has one node of four devices whose
link is 50 µs and 1 GB/s, so every expected time below is a sum of hand-computed figures.
"""

from __future__ import annotations

import json
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import torch
import zygote_ranks

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

WORLD = 4
ALPHA = 50e-6  # s, the link's latency
BANDWIDTH = 1e9  # bytes/s
N = 250_000  # float32 elements: 1 MB, so one exchange costs ALPHA + 1e-3 s
EXCHANGE_S = ALPHA + 4 * N / BANDWIDTH
PARTNER = {0: 1, 1: 0, 2: 3, 3: 2}
TIMEOUT_S = 60.0

PROFILE = """\
schema_version: 1
name: p2p-4
description: four devices on one node, 50 us and 1 GB/s between any two
nodes:
  - name: a
    devices:
      - {name: g, kind: gpu, count: 4, memory_gib: 16, effective_flops_per_s: 1.0e12, source: "[E] test"}
network:
  intra_node: {latency_us: 50, bandwidth_gbytes_per_s: 1, source: "[E] test"}
  inter_node: {latency_us: 50, bandwidth_gbytes_per_s: 1, source: "[E] test"}
"""


def _times(work: Any) -> list[float]:
    return [work.issue_s, work.start_s, work.end_s]


def _scenario(rank: int, comm: Any, clock: Any) -> dict[str, Any]:
    """Pair (non-blocking, across a collective), then exchange (tampered input, two queued on the lane)."""
    out: dict[str, Any] = {}
    partner = PARTNER[rank]
    # 1. Even ranks ask to pair at 0.1 s and go on into a collective the odd ranks reach at 0.3 s; the odd
    #    ranks ask only after it, at its end + 0.2 s. A pair() that blocked until answered would deadlock here.
    if rank % 2 == 0:
        clock.compute(0.1)
        asked = comm.pair([partner], async_op=True)
        out["pair_done_at_issue"] = asked.is_completed()
        comm.barrier()
    else:
        clock.compute(0.3)
        comm.barrier()
        out["after_barrier"] = clock.t
        clock.compute(0.2)
        asked = comm.pair([partner], async_op=True)
    asked.wait()
    out["pair"] = asked.result()
    out["pair_times"] = _times(asked)
    out["clock_after_pair"] = clock.t
    out["idle_after_pair"] = clock.idle_s

    # 2. One exchange, issued 0.01·rank s apart; the input is changed right after issue.
    clock.compute(0.01 * rank)
    mine = torch.full((N,), float(rank + 1))
    work = comm.exchange(partner, mine, async_op=True)
    mine.add_(100.0)
    out["exchange_done_at_issue"] = work.is_completed()
    out["exchange_result_at_issue"] = work.result()
    clock.compute(1e-4)  # less than the exchange: the rest is waited for
    work.wait()
    theirs = work.result()
    out["received"] = [float(theirs.min()), float(theirs.max()), list(theirs.shape)]
    out["mine_after"] = float(mine[0])  # the input is not an output: never written
    out["exchange_times"] = _times(work)
    out["clock_after_exchange"] = clock.t
    out["bytes"] = comm.bytes_sent

    # 3. Two exchanges issued back to back on the pair's lane: the second starts when the first ends.
    first = comm.exchange(partner, torch.full((N,), 10.0 * (rank + 1)), async_op=True)
    second = comm.exchange(partner, torch.full((N,), 20.0 * (rank + 1)), async_op=True)
    second.wait()  # resolves the first too (its lane predecessor) but leaves its wait to the caller
    first.wait()
    out["queued_times"] = [_times(first), _times(second)]
    out["queued_received"] = [float(first.result()[0]), float(second.result()[0])]
    out["clock_end"] = clock.t

    # 4. Every neighbour finished: the answer is None at the issue time. Rank 3 asks only rank 2, which
    #    announces it is done first (the coordinator releases the request whichever comes first in real time).
    if rank == 3:
        late = comm.pair([2], async_op=True)
        late.wait()
        out["late_pair"] = [late.result(), *_times(late)]
    return out


def _worker(rank: int, rendezvous: str, folder: str) -> None:
    import torch.distributed as dist

    from distrepro.engine.clock import VirtualClock
    from distrepro.engine.multiprocess.comm import DistComm
    from distrepro.engine.multiprocess.pairing import PairingClient, PairingCoordinator
    from distrepro.engine.multiprocess.run import store_of_default_group
    from distrepro.hardware.profiles import load_profile
    from distrepro.timing.timemodel import CommCostModel

    path = Path(folder)
    try:
        dist.init_process_group(
            "gloo", init_method=rendezvous, rank=rank, world_size=WORLD, timeout=timedelta(seconds=TIMEOUT_S)
        )
        store = store_of_default_group()
        coordinator = PairingCoordinator(store, WORLD, TIMEOUT_S) if rank == 0 else None
        if coordinator is not None:
            coordinator.start()
        pairing = PairingClient(store, rank, TIMEOUT_S)
        clock = VirtualClock(rank)
        comm = DistComm(rank, WORLD, clock, CommCostModel(load_profile(path / "p2p-4.yaml")), pairing=pairing)
        out = _scenario(rank, comm, clock)
        pairing.done()
        if coordinator is not None:
            coordinator.join(TIMEOUT_S)
        dist.destroy_process_group()
    except BaseException:
        (path / f"rank{rank}.error.txt").write_text(traceback.format_exc())
        raise
    (path / f"rank{rank}.json").write_text(json.dumps(out))


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict[str, Any]]:
    """Run the scenario once on four gloo processes; every test below reads its records."""
    folder = tmp_path_factory.mktemp("dist-comm")
    (folder / "p2p-4.yaml").write_text(PROFILE, encoding="utf-8")
    try:  # the ranks forked from the zygote, not spawned afresh (zygote_ranks says why)
        zygote_ranks.spawn(_worker, (f"file://{folder / 'rendezvous'}", str(folder)), nprocs=WORLD)
    except Exception as exc:
        errors = "\n".join(p.read_text() for p in sorted(folder.glob("rank*.error.txt")))
        raise AssertionError(f"a rank failed:\n{errors}") from exc
    return {r: json.loads((folder / f"rank{r}.json").read_text()) for r in range(WORLD)}


def test_profile_figures_are_the_hand_computed_ones(tmp_path: Path) -> None:
    """The expected times below rest on this: one 1 MB exchange on the profile is 50 µs + 1 ms."""
    from distrepro.hardware.profiles import load_profile
    from distrepro.timing.timemodel import CommCostModel

    (tmp_path / "p2p-4.yaml").write_text(PROFILE, encoding="utf-8")
    cost = CommCostModel(load_profile(tmp_path / "p2p-4.yaml"))
    assert cost.exchange(0, 1, 4 * N) == pytest.approx(EXCHANGE_S, rel=1e-12) == pytest.approx(1.05e-3)


def test_non_blocking_pair_returns_at_once_and_ends_at_the_later_request(ranks: dict[int, dict[str, Any]]) -> None:
    """Even ranks asked at 0.1 s and went into a barrier; odd ranks asked at barrier end + 0.2 s. Both sides
    pair at the odd rank's request time, and the even rank's wait() is idle until then."""
    for even in (0, 2):
        odd = even + 1
        asked_at = ranks[odd]["after_barrier"] + 0.2
        assert ranks[even]["pair_done_at_issue"] is False
        assert (ranks[even]["pair"], ranks[odd]["pair"]) == (odd, even)
        assert ranks[even]["pair_times"] == pytest.approx([0.1, asked_at, asked_at], rel=1e-12)
        assert ranks[odd]["pair_times"] == pytest.approx([asked_at] * 3, rel=1e-12)
        assert ranks[even]["clock_after_pair"] == pytest.approx(asked_at, rel=1e-12)
        # idle 0.2 s more in the barrier (from 0.1 s to 0.3 s) and 0.2 s more waiting for the pair
        assert ranks[even]["idle_after_pair"] - ranks[odd]["idle_after_pair"] == pytest.approx(0.4, rel=1e-9)


def test_non_blocking_exchange_takes_the_input_at_issue_and_delivers_at_wait(
    ranks: dict[int, dict[str, Any]],
) -> None:
    for r, rec in ranks.items():
        peer = PARTNER[r]
        assert rec["exchange_done_at_issue"] is False and rec["exchange_result_at_issue"] is None
        assert rec["received"] == [peer + 1.0, peer + 1.0, [N]]  # the peer's value at issue, not +100
        assert rec["mine_after"] == r + 101.0  # the caller's own tensor is left as the caller changed it
        assert rec["bytes"] == 4 * N


def test_exchange_times_follow_the_alpha_beta_cost(ranks: dict[int, dict[str, Any]]) -> None:
    """issue = own clock; start = the later member's issue; end = start + α + S/B; the caller's clock
    moves to the end (the 0.1 ms of compute after issue is hidden under the 1.05 ms exchange)."""
    for r, rec in ranks.items():
        peer = PARTNER[r]
        paired = ranks[r]["clock_after_pair"]
        assert paired == pytest.approx(ranks[peer]["clock_after_pair"], rel=1e-12)
        issue = paired + 0.01 * r
        start = paired + 0.01 * max(r, peer)
        issue_s, start_s, end_s = rec["exchange_times"]
        assert issue_s <= start_s <= end_s
        assert [issue_s, start_s, end_s] == pytest.approx([issue, start, start + EXCHANGE_S], rel=1e-12)
        assert rec["clock_after_exchange"] == pytest.approx(start + EXCHANGE_S, rel=1e-12)
        assert rec["exchange_times"][1:] == pytest.approx(ranks[peer]["exchange_times"][1:], rel=1e-12)


def test_exchanges_on_one_lane_run_one_after_the_other(ranks: dict[int, dict[str, Any]]) -> None:
    for r, rec in ranks.items():
        t0 = rec["clock_after_exchange"]
        first, second = rec["queued_times"]
        assert first == pytest.approx([t0, t0, t0 + EXCHANGE_S], rel=1e-12)
        assert second == pytest.approx([t0, t0 + EXCHANGE_S, t0 + 2 * EXCHANGE_S], rel=1e-12)
        assert rec["queued_received"] == [10.0 * (PARTNER[r] + 1), 20.0 * (PARTNER[r] + 1)]
        assert rec["clock_end"] == pytest.approx(t0 + 2 * EXCHANGE_S, rel=1e-12)


def test_pair_with_every_neighbour_finished_is_none_at_issue(ranks: dict[int, dict[str, Any]]) -> None:
    peer, issue_s, start_s, end_s = ranks[3]["late_pair"]
    assert peer is None
    assert issue_s == start_s == end_s == pytest.approx(ranks[3]["clock_end"], rel=1e-12)
