"""Lanes and fair sharing (issue 11 item 3): max-min fair flows, FIFO lanes, Work times, on hand-computed cases.

The rule (:mod:`distrepro.timing.network`): concurrent flows through one resource (a node's NIC in one direction)
share its bandwidth max-min fairly (progressive filling); operations on one lane (a group, a pair) run
one after the other. Profiles here have zero latency and 1 GB/s NICs so every figure is a division.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from lanenet import G, Net

from distrepro.engine.clock import VirtualClock
from distrepro.engine.inprocess.comm import InProcessComm
from distrepro.hardware.profiles import load_profile
from distrepro.timing.network import Flow, max_min_rates, simulate

pytestmark = pytest.mark.smoke

NIC = [("nic", 1)]


def test_two_and_four_equal_flows_share_one_nic() -> None:
    """1 GB each on a 1 GB/s NIC: 2 flows get 0.5 GB/s each and end at 2 s; 4 get 0.25 GB/s and end at 4 s."""
    assert simulate([(0.0, G, G, NIC)] * 2, {"nic": G}) == [2.0, 2.0]
    assert simulate([(0.0, G, G, NIC)] * 4, {"nic": G}) == [4.0, 4.0, 4.0, 4.0]


def test_a_flow_starting_halfway_through_another() -> None:
    """1 GB/s NIC; flow A 1 GB at t=0, flow B 0.5 GB at t=0.5.

    0 → 0.5 s: A alone at 1 GB/s moves 0.5 GB (0.5 GB left). From 0.5 s both share: 0.5 GB/s each.
    A needs 0.5 / 0.5 = 1 s more, B needs 0.5 / 0.5 = 1 s: both end at 1.5 s.
    """
    assert simulate([(0.0, G, G, NIC), (0.5, 0.5 * G, G, NIC)], {"nic": G}) == [1.5, 1.5]


def test_progressive_filling_gives_the_leftover_to_the_unblocked_flow() -> None:
    """f0 on a (1 GB/s), f1 on a and b, f2 on b (1.5 GB/s), caps 1 GB/s: a fills first at 0.5 each (f0, f1
    frozen); f2 rises to its cap 1 (b holds 1.5 - 0.5). f2 ends at 1 s; then f0 and f1 still share a:
    0.5 GB left each at 0.5 GB/s → 2 s."""
    flows = [Flow(0, G, G, (("a", 1),), 0.0), Flow(1, G, G, (("a", 1), ("b", 1)), 0.0), Flow(2, G, G, (("b", 1),), 0.0)]
    assert max_min_rates(flows, {"a": G, "b": 1.5 * G}) == {0: 0.5 * G, 1: 0.5 * G, 2: 1.0 * G}
    assert simulate([(0.0, G, G, f.uses) for f in flows], {"a": G, "b": 1.5 * G}) == [2.0, 2.0, 1.0]


def test_a_flow_crossing_a_nic_twice_counts_twice() -> None:
    """Weight 2 on a 1 GB/s NIC with a 1 GB/s cap: it can use only 0.5 GB/s."""
    assert simulate([(0.0, G, G, [("nic", 2)])], {"nic": G}) == [2.0]


def _times(works: list[Any]) -> list[tuple[float, float, float]]:
    for w in works:
        w.wait()
    return [(w.issue_s, w.start_s, w.end_s) for w in works]


@pytest.mark.parametrize("peers", [2, 4])
def test_concurrent_all_reduces_through_one_nic_share_it(tmp_path: Path, peers: int) -> None:
    """Rank 0 all-reduces 1 GB with each of ``peers`` ranks on other nodes at once (one lane per group).
    A 2-rank ring all-reduce of S moves S/B alone (1 s); all of them leave through rank 0's NIC, so each
    gets 1/peers of it and all end at ``peers`` seconds (before lanes: all at 1 s, as if alone)."""
    net = Net(tmp_path, peers + 1)
    groups = [net.fabric.comms[0].new_group([0, j]) for j in range(1, peers + 1)]

    def body(rank: int, comm: InProcessComm, clock: VirtualClock) -> Any:
        mine = groups if rank == 0 else [groups[rank - 1]]
        return _times([comm.charge("all_reduce", G, g, async_op=True) for g in mine])

    out = net.run(body)
    assert out[0] == [pytest.approx((0.0, 0.0, float(peers)), rel=1e-12)] * peers
    assert [c.t for c in net.clocks] == pytest.approx([float(peers)] * (peers + 1), rel=1e-12)


def test_ops_on_one_lane_run_one_after_the_other(tmp_path: Path) -> None:
    """Four async 1 GB all-reduces on one group queue on its lane: (issue, start, end) = (0, k, k+1)."""
    net = Net(tmp_path, 2)
    out = net.run(lambda r, comm, clock: _times([comm.charge("all_reduce", G, async_op=True) for _ in range(4)]))
    assert out[0] == out[1] == [pytest.approx((0.0, float(k), k + 1.0)) for k in range(4)]


def test_halfway_flow_on_the_engine_and_overlap_with_compute(tmp_path: Path) -> None:
    """The hand case on the engine: rank 0 all-reduces 1 GB with rank 1 at t=0 and 0.5 GB with rank 2 at
    t=0.5 (after 0.5 s of compute): both end at 1.5 s. Rank 0 then computes until 2 s and waits: nothing
    left to wait for, so its 1.5 s of communication is hidden (comm_s = 0)."""
    net = Net(tmp_path, 3)
    g01, g02 = (net.fabric.comms[0].new_group(r) for r in ([0, 1], [0, 2]))

    def body(rank: int, comm: InProcessComm, clock: VirtualClock) -> Any:
        works = []
        if rank in (0, 1):
            works.append(comm.charge("all_reduce", G, g01, async_op=True))
        if rank in (0, 2):
            clock.compute(0.5)
            works.append(comm.charge("all_reduce", 0.5 * G, g02, async_op=True))
        if rank == 0:
            clock.compute(1.5)
        return _times(works)

    out = net.run(body)
    assert out[0] == [pytest.approx((0.0, 0.0, 1.5)), pytest.approx((0.5, 0.5, 1.5))]
    assert net.clocks[0].t == 2.0 and net.clocks[0].comm_s == 0.0
    assert net.clocks[1].t == pytest.approx(1.5) and net.clocks[2].t == pytest.approx(1.5)


def test_concurrent_flows_on_one_intra_node_link_share_it(tmp_path: Path) -> None:
    """Two GPUs of one node (10 GB/s link each way): a 10 GB exchange and a 10 GB all-reduce of the pair (ring of
    2: 10 GB each way) issued together both cross link 0→1 and 1→0; alone each takes 1 s, together they share
    the links at 5 GB/s each and both end at 2 s (intra-node links are resources like NICs)."""
    net = Net(tmp_path, 1, bytes_scale=10 * G / 4, per_node=2)  # one float32 stands for 10 GB

    def body(rank: int, comm: InProcessComm, clock: VirtualClock) -> Any:
        x = comm.exchange(1 - rank, torch.zeros(1), async_op=True)
        r = comm.all_reduce(torch.zeros(1), async_op=True)
        return _times([x, r])

    out = net.run(body)
    assert out[0] == out[1] == [pytest.approx((0.0, 0.0, 2.0)), pytest.approx((0.0, 0.0, 2.0))]


def test_async_exchange_and_pair_return_work(tmp_path: Path) -> None:
    """Non-blocking pair and exchange: the partner and the peer's tensor come back through ``result()``."""
    net = Net(tmp_path, 2)

    def body(rank: int, comm: InProcessComm, clock: VirtualClock) -> Any:
        clock.compute(0.25 * (rank + 1))
        w = comm.pair([1 - rank], async_op=True)
        w.wait()
        x = comm.exchange(w.result(), torch.full((4,), float(rank)), async_op=True)
        x.wait()
        return w.result(), float(x.result()[0]), w.end_s, x.start_s

    out = net.run(body)
    assert out[0] == (1, 1.0, 0.5, 0.5) and out[1] == (0, 0.0, 0.5, 0.5)
    assert net.clocks[0].idle_s == pytest.approx(0.25)


def test_schema_2_keys_need_schema_2_and_ctx_cluster_shows_the_layout(tmp_path: Path) -> None:
    """A node NIC in a version-1 file is refused (a v1 reader must not meet semantics it does not declare);
    the layout methods see is the node of each rank."""
    from distrepro.errors import ConfigError
    from distrepro.hardware.cluster_layout import cluster_layout

    Net(tmp_path, 3)
    text = (tmp_path / "lanes.yaml").read_text(encoding="utf-8")
    (tmp_path / "v1.yaml").write_text(text.replace("schema_version: 2", "schema_version: 1"), encoding="utf-8")
    with pytest.raises(ConfigError, match="need schema_version: 2"):
        load_profile(tmp_path / "v1.yaml")
    layout = cluster_layout(load_profile("hetero-2fast-2slow"))
    assert layout.node_of_rank == (0, 0, 1, 1) and layout.ranks_per_node == (2, 2)
    assert layout.same_node(0, 1) and not layout.same_node(1, 2)
