"""The in-memory Comm against hand computations: values, virtual times, idle time and bytes.

Every test builds a :class:`Scheduler` and a :class:`Fabric` over a profile written here, runs one
small callable per rank and checks results against numbers worked out by hand from the profile's
latencies and bandwidths (alpha-beta model; see ``distrepro/timing/timemodel.py`` for the formulas).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from distrepro.api.method import Work
from distrepro.engine.clock import Span, VirtualClock
from distrepro.engine.inprocess.comm import Fabric, InProcessComm
from distrepro.engine.inprocess.scheduler import Scheduler
from distrepro.hardware.profiles import load_profile
from distrepro.plugins.registry import get_method
from distrepro.timing.timemodel import CommCostModel

pytestmark = pytest.mark.smoke

PLUGINS = Path(__file__).resolve().parents[1] / "_support" / "plugins"

# Link figures of the test profile (hand computations below use these literals).
ALPHA_INTRA, B_INTRA = 20e-6, 2e9  # 20 us, 2 GB/s
ALPHA_INTER, B_INTER = 100e-6, 0.5e9  # 100 us, 0.5 GB/s
ALPHA_PS, B_PS = 50e-6, 1e9  # worker <-> parameter server: 50 us, 1 GB/s

N_FLOATS = 250_000
S = 4 * N_FLOATS  # bytes of one float32 tensor of N_FLOATS elements: 1e6

PROFILE = """\
schema_version: 1
name: {name}
description: hand-written test profile
collective_algorithm: ring
nodes:
{nodes}
network:
  intra_node: {{latency_us: 20, bandwidth_gbytes_per_s: 2, source: "[E] test"}}
  inter_node: {{latency_us: 100, bandwidth_gbytes_per_s: 0.5, source: "[E] test"}}
  server: {{latency_us: 50, bandwidth_gbytes_per_s: 1, source: "[E] test"}}
"""

NODE = """\
  - name: {name}
    devices:
      - {{name: g, kind: gpu, count: {count}, memory_gib: 16, effective_flops_per_s: 1.0e12, source: "[E] test"}}
"""


def write_profile(tmp_path: Path, counts: tuple[int, ...] = (4,), name: str = "hand") -> Path:
    """A profile whose nodes hold ``counts[i]`` GPUs each (ranks numbered node by node)."""
    nodes = "".join(NODE.format(name=f"n{i}", count=c) for i, c in enumerate(counts))
    path = tmp_path / f"{name}.yaml"
    path.write_text(PROFILE.format(name=name, nodes=nodes), encoding="utf-8")
    return path


class Net:
    """A scheduler, a fabric and a way to run one callable per rank."""

    def __init__(self, tmp_path: Path, counts: tuple[int, ...] = (4,), bytes_scale: float = 1.0) -> None:
        profile = load_profile(write_profile(tmp_path, counts))
        self.world = profile.world_size
        self.clocks = [VirtualClock(r) for r in range(self.world)]
        self.sched = Scheduler(self.clocks)
        self.fabric = Fabric(self.sched, CommCostModel(profile), bytes_scale=bytes_scale)
        self.out: dict[int, Any] = {}

    def run(self, body: Callable[[int, InProcessComm, VirtualClock], Any]) -> dict[int, Any]:
        """Run ``body(rank, comm, clock)`` on every rank; its return values, by rank."""

        def target(rank: int) -> Callable[[], None]:
            def go() -> None:
                self.out[rank] = body(rank, self.fabric.comms[rank], self.clocks[rank])

            return go

        self.sched.run([target(r) for r in range(self.world)])
        return self.out

    def bytes_sent(self) -> list[int]:
        return [c.bytes_sent for c in self.fabric.comms]


def ring(p: int, nbytes: float, alpha: float = ALPHA_INTRA, bandwidth: float = B_INTRA) -> float:
    """2(p-1)·α + 2(p-1)/p · S/B, the ring all-reduce of Thakur, Rabenseifner & Gropp (2005)."""
    return 2 * (p - 1) * alpha + 2 * (p - 1) / p * nbytes / bandwidth


def test_hand_written_profile_has_the_links_the_hand_computations_use(tmp_path: Path) -> None:
    profile = load_profile(write_profile(tmp_path, (2, 2)))
    assert profile.world_size == 4
    intra, inter, server = profile.link(0, 1), profile.link(1, 2), profile.server_link(3)
    assert (intra.latency_s, intra.bandwidth_bytes_per_s) == pytest.approx((ALPHA_INTRA, B_INTRA), rel=1e-12)
    assert (inter.latency_s, inter.bandwidth_bytes_per_s) == pytest.approx((ALPHA_INTER, B_INTER), rel=1e-12)
    assert (server.latency_s, server.bandwidth_bytes_per_s) == pytest.approx((ALPHA_PS, B_PS), rel=1e-12)
    assert ring(4, 1e6) == pytest.approx(6 * 20e-6 + 1.5 * 1e6 / 2e9, rel=1e-12)  # 870 us


# ---------------------------------------------------------------------- all-reduce


@pytest.mark.parametrize(
    ("op", "expected"),
    [("sum", [10.0, 20.0]), ("mean", [2.5, 5.0]), ("max", [4.0, 8.0]), ("min", [1.0, 2.0])],
)
def test_all_reduce_values(tmp_path: Path, op: str, expected: list[float]) -> None:
    net = Net(tmp_path)
    tensors = {r: torch.tensor([r + 1.0, 2.0 * (r + 1)]) for r in range(4)}

    def body(rank: int, comm: InProcessComm, clock: VirtualClock) -> Any:
        return comm.all_reduce(tensors[rank], op=op)  # type: ignore[arg-type]

    out = net.run(body)
    assert out == dict.fromkeys(range(4))  # blocking: returns None, works in place
    for r in range(4):
        assert tensors[r].tolist() == expected


def test_all_reduce_coalesced_reduces_every_tensor_of_the_bucket(tmp_path: Path) -> None:
    net = Net(tmp_path)
    buckets = {r: [torch.full((2, 2), float(r)), torch.tensor([1.0, -float(r)])] for r in range(4)}
    net.run(lambda r, comm, clock: comm.all_reduce_coalesced(buckets[r], op="sum"))
    for r in range(4):
        assert torch.equal(buckets[r][0], torch.full((2, 2), 6.0))
        assert torch.equal(buckets[r][1], torch.tensor([4.0, -6.0]))
    # one message of the whole bucket (6 floats = 24 bytes), one latency term
    assert [c.t for c in net.clocks] == pytest.approx([ring(4, 24)] * 4, rel=1e-12)


def test_collective_starts_at_last_arrival_and_early_arrivals_idle(tmp_path: Path) -> None:
    net = Net(tmp_path)
    compute = [0.1, 0.4, 0.2, 0.3]  # rank 1 arrives last, at 0.4 s

    def body(rank: int, comm: InProcessComm, clock: VirtualClock) -> None:
        clock.compute(compute[rank])
        comm.all_reduce(torch.ones(N_FLOATS))

    net.run(body)
    cost = 2 * 3 * 20e-6 + 2 * 3 / 4 * 1e6 / 2e9  # = 870 us, by hand
    assert cost == pytest.approx(870e-6, rel=1e-12)
    for r, c in enumerate(net.clocks):
        assert c.t == pytest.approx(0.4 + cost, rel=1e-12), r
        assert c.compute_s == compute[r]
        assert c.idle_s == pytest.approx(0.4 - compute[r], abs=1e-15)
        assert c.comm_s == pytest.approx(cost, rel=1e-9)
    # the timeline shows who waited: rank 0 computed, idled from 0.1 to 0.4, then communicated
    kinds = [(s.kind, round(s.start_s, 9), round(s.end_s, 9)) for s in net.clocks[0].spans]
    assert kinds == [("compute", 0.0, 0.1), ("idle", 0.1, 0.4), ("comm", 0.4, round(0.4 + cost, 9))]
    assert [s.kind for s in net.clocks[1].spans] == ["compute", "comm"]  # the last arrival never idles
    assert net.bytes_sent() == [int(2 * 3 / 4 * S)] * 4


def test_ring_is_charged_at_its_worst_link_and_groups_use_their_own_links(tmp_path: Path) -> None:
    net = Net(tmp_path, counts=(2, 2))  # ranks 0-1 on n0, 2-3 on n1

    def body(rank: int, comm: InProcessComm, clock: VirtualClock) -> float:
        comm.all_reduce(torch.ones(N_FLOATS))  # ring 0-1-2-3: crosses the 100 us, 0.5 GB/s link
        after_world = clock.t
        group = comm.new_group([0, 1] if rank < 2 else [2, 3])
        comm.all_reduce(torch.ones(N_FLOATS), group=group)  # each pair stays inside its node
        return after_world

    out = net.run(body)
    world_cost = 2 * 3 * 100e-6 + 2 * 3 / 4 * 1e6 / 0.5e9  # 600 us + 3 ms
    pair_cost = 2 * 1 * 20e-6 + 2 * 1 / 2 * 1e6 / 2e9  # 40 us + 500 us
    for r in range(4):
        assert out[r] == pytest.approx(world_cost, rel=1e-12)
        assert net.clocks[r].t == pytest.approx(world_cost + pair_cost, rel=1e-12)
    assert net.bytes_sent() == [int(1.5 * S + 1.0 * S)] * 4


def test_group_collective_leaves_non_members_alone(tmp_path: Path) -> None:
    net = Net(tmp_path)
    tensors = {r: torch.tensor([float(r)]) for r in range(4)}

    def body(rank: int, comm: InProcessComm, clock: VirtualClock) -> None:
        group = comm.new_group([0, 2])
        if rank in (0, 2):
            comm.all_reduce(tensors[rank], group=group)

    net.run(body)
    assert [tensors[r].item() for r in range(4)] == [2.0, 1.0, 2.0, 3.0]
    assert [c.t for c in net.clocks] == pytest.approx([ring(2, 4), 0.0, ring(2, 4), 0.0], rel=1e-12)
    assert net.bytes_sent()[1] == net.bytes_sent()[3] == 0


def test_group_misuse_is_refused(tmp_path: Path) -> None:
    net = Net(tmp_path)
    comm = net.fabric.comms[1]
    with pytest.raises(ValueError, match="invalid group ranks"):
        comm.new_group([0, 4])
    with pytest.raises(ValueError, match="invalid group ranks"):
        comm.new_group([2, 2])
    with pytest.raises(RuntimeError, match="rank 1 is not a member of group \\[0, 2\\]"):
        comm.all_reduce(torch.ones(1), group=comm.new_group([0, 2]))


# ---------------------------------------------------------------------- weighted average, broadcast


def test_weighted_average_is_sum_w_x_over_sum_w(tmp_path: Path) -> None:
    net = Net(tmp_path)
    weights = [1.0, 2.0, 3.0, 4.0]
    tensors = {r: [torch.tensor([float(r), 1.0]), torch.tensor([[10.0 * r]])] for r in range(4)}
    net.run(lambda r, comm, clock: comm.weighted_average(tensors[r], weight=weights[r]))
    # (0·1 + 1·2 + 2·3 + 3·4) / 10 = 2;  (1+2+3+4)/10 = 1;  10·2 = 20
    for r in range(4):
        assert tensors[r][0].tolist() == pytest.approx([2.0, 1.0], rel=1e-7)
        assert tensors[r][1].shape == (1, 1) and tensors[r][1].item() == pytest.approx(20.0, rel=1e-7)
    nbytes = 3 * 4 + 4  # three floats and the scalar weight
    assert [c.t for c in net.clocks] == pytest.approx([ring(4, nbytes)] * 4, rel=1e-12)
    assert net.bytes_sent() == [int(1.5 * nbytes)] * 4


def test_weighted_average_with_zero_total_weight_is_an_error(tmp_path: Path) -> None:
    net = Net(tmp_path)
    with pytest.raises(RuntimeError, match="total weight 0"):
        net.run(lambda r, comm, clock: comm.weighted_average([torch.ones(1)], weight=0.0))


def test_broadcast_copies_src_and_costs_a_binomial_tree(tmp_path: Path) -> None:
    net = Net(tmp_path)
    tensors = {r: torch.full((N_FLOATS,), float(r)) for r in range(4)}
    net.run(lambda r, comm, clock: comm.broadcast(tensors[r], src=2))
    for r in range(4):
        assert torch.equal(tensors[r], torch.full((N_FLOATS,), 2.0))
    cost = 2 * (20e-6 + 1e6 / 2e9)  # ceil(log2 4) = 2 rounds of α + S/B
    assert [c.t for c in net.clocks] == pytest.approx([cost] * 4, rel=1e-12)
    assert net.bytes_sent() == [int(3 / 4 * S)] * 4


def test_broadcast_members_must_agree_on_src(tmp_path: Path) -> None:
    net = Net(tmp_path)
    with pytest.raises(RuntimeError, match="disagree on src"):
        net.run(lambda r, comm, clock: comm.broadcast(torch.zeros(1), src=0 if r < 3 else 1))


def test_all_gather_object_and_barrier(tmp_path: Path) -> None:
    net = Net(tmp_path, counts=(2, 2))

    def body(rank: int, comm: InProcessComm, clock: VirtualClock) -> list[Any]:
        clock.compute(0.01 * rank)
        got = comm.all_gather_object({"rank": rank, "speed": 100.0 * rank})
        comm.barrier()
        return got

    out = net.run(body)
    expected = [{"rank": r, "speed": 100.0 * r} for r in range(4)]
    assert all(out[r] == expected for r in range(4))
    assert out[0] is not out[1]  # each rank gets its own list
    # control rounds cost the largest latency of the group (the inter-node 100 us), payload ignored
    end = 0.03 + 100e-6 + 100e-6
    assert [c.t for c in net.clocks] == pytest.approx([end] * 4, rel=1e-12)
    assert net.clocks[0].idle_s == pytest.approx(0.03, rel=1e-12)
    assert net.bytes_sent() == [0, 0, 0, 0]


# ---------------------------------------------------------------------- point to point


def test_exchange_swaps_and_costs_one_transfer(tmp_path: Path) -> None:
    net = Net(tmp_path, counts=(2, 2))
    mine = {r: torch.full((N_FLOATS,), float(r)) for r in range(4)}

    def body(rank: int, comm: InProcessComm, clock: VirtualClock) -> torch.Tensor:
        clock.compute([0.1, 0.3, 0.0, 0.0][rank])
        peer = {0: 1, 1: 0, 2: 3, 3: 2}[rank]
        return comm.exchange(peer, mine[rank])

    out = net.run(body)
    for r, peer in {0: 1, 1: 0, 2: 3, 3: 2}.items():
        assert torch.equal(out[r], torch.full((N_FLOATS,), float(peer)))
        assert torch.equal(mine[r], torch.full((N_FLOATS,), float(r)))  # own tensor untouched
        assert out[r].data_ptr() != mine[peer].data_ptr()  # a new tensor, not the peer's storage
    cost = 20e-6 + 1e6 / 2e9  # α + S/B, full duplex: one transfer for the swap
    assert net.clocks[0].t == pytest.approx(0.3 + cost, rel=1e-12)
    assert net.clocks[1].t == pytest.approx(0.3 + cost, rel=1e-12)
    assert net.clocks[0].idle_s == pytest.approx(0.2, rel=1e-12)
    assert net.clocks[1].idle_s == 0.0
    assert net.clocks[2].t == pytest.approx(cost, rel=1e-12)
    assert net.bytes_sent() == [S] * 4


def test_exchange_across_nodes_uses_the_inter_node_link(tmp_path: Path) -> None:
    """Two GPUs per node, both exchanging across nodes at once: the two swaps share each node's one NIC.

    Each swap moves S = 1 MB each way; node n0's NIC sends for both (0→2 and 1→3) at 0.5 GB/s in all, so
    each gets 0.25 GB/s (max-min fair) and its data takes 1e6 / 0.25e9 = 4 ms, then its 100 us latency:
    4.1 ms. (Before per-node NICs each GPU saw the whole 0.5 GB/s: 2.1 ms.) One swap alone is 2.1 ms.
    """
    net = Net(tmp_path, counts=(2, 2))

    def body(rank: int, comm: InProcessComm, clock: VirtualClock) -> None:
        comm.exchange({0: 2, 2: 0, 1: 3, 3: 1}[rank], torch.zeros(N_FLOATS))

    net.run(body)
    assert [c.t for c in net.clocks] == pytest.approx([100e-6 + 1e6 / 0.25e9] * 4, rel=1e-12)

    alone = Net(tmp_path, counts=(2, 2))
    alone.run(
        lambda rank, comm, clock: comm.exchange({0: 2, 2: 0}[rank], torch.zeros(N_FLOATS)) if rank in (0, 2) else None
    )
    assert [alone.clocks[r].t for r in (0, 2)] == pytest.approx([100e-6 + 1e6 / 0.5e9] * 2, rel=1e-12)


def test_exchange_with_self_or_out_of_range_is_refused(tmp_path: Path) -> None:
    net = Net(tmp_path)
    with pytest.raises(ValueError, match="invalid exchange peer 1"):
        net.fabric.comms[1].exchange(1, torch.zeros(1))
    with pytest.raises(ValueError, match="invalid exchange peer 9"):
        net.fabric.comms[1].exchange(9, torch.zeros(1))


def test_pair_matches_ready_neighbours_and_charges_the_wait_as_idle(tmp_path: Path) -> None:
    net = Net(tmp_path)
    wants = {0: [1], 1: [0], 2: [3], 3: [2]}
    compute = [0.0, 2.0, 1.0, 0.5]

    def body(rank: int, comm: InProcessComm, clock: VirtualClock) -> int | None:
        clock.compute(compute[rank])
        return comm.pair(wants[rank])

    out = net.run(body)
    assert out == {0: 1, 1: 0, 2: 3, 3: 2}
    assert [c.t for c in net.clocks] == [2.0, 2.0, 1.0, 1.0]  # pairing itself is free
    assert [c.idle_s for c in net.clocks] == [2.0, 0.0, 0.0, 0.5]


def test_pair_needs_the_neighbour_to_list_us_too(tmp_path: Path) -> None:
    """Rank 0 asks for 1, but 1 asks for 2 only: 1 pairs with 2; 0 gets None once 1 has finished."""
    net = Net(tmp_path)
    wants = {0: [1], 1: [2], 2: [1]}
    compute = [0.0, 1.0, 2.0]

    def body(rank: int, comm: InProcessComm, clock: VirtualClock) -> int | None:
        if rank == 3:
            return -1
        clock.compute(compute[rank])
        return comm.pair(wants[rank])

    out = net.run(body)
    assert out == {0: None, 1: 2, 2: 1, 3: -1}
    assert net.clocks[1].idle_s == 1.0
    assert net.clocks[0].t == 0.0 and net.clocks[0].idle_s == 0.0


def test_pair_returns_none_when_every_neighbour_has_finished(tmp_path: Path) -> None:
    net = Net(tmp_path)

    def body(rank: int, comm: InProcessComm, clock: VirtualClock) -> int | None:
        if rank == 3:
            clock.compute(5.0)  # asks after 0, 1 and 2 have all finished
            return comm.pair([0, 1, 2])
        if rank == 2:
            return None
        return comm.pair([1 - rank])

    out = net.run(body)
    assert out == {0: 1, 1: 0, 2: None, 3: None}
    assert net.clocks[3].t == 5.0 and net.clocks[3].idle_s == 0.0


# ---------------------------------------------------------------------- parameter server


def test_ps_sync_value_and_cost(tmp_path: Path) -> None:
    net = Net(tmp_path)
    weights = [1.0, 1.0, 2.0, 4.0]
    tensors = {r: torch.full((N_FLOATS,), float(r)) for r in range(4)}
    net.run(lambda r, comm, clock: comm.ps_sync([tensors[r]], weight=weights[r]))
    value = (0 * 1 + 1 * 1 + 2 * 2 + 3 * 4) / 8  # 17/8
    for r in range(4):
        assert torch.allclose(tensors[r], torch.full((N_FLOATS,), value), rtol=1e-6, atol=0)
    size = 1e6 + 4  # the bucket plus the scalar weight
    worker = 2 * (50e-6 + size / 1e9)  # own push + pull: 2.1 ms
    server = 2 * 50e-6 + 2 * 4 * size / 1e9  # the server link carries 4 pushes + 4 pulls: 8.1 ms
    assert server > worker
    assert [c.t for c in net.clocks] == pytest.approx([server] * 4, rel=1e-12)
    assert net.bytes_sent() == [int(size)] * 4


# ---------------------------------------------------------------------- non-blocking operations


@pytest.mark.parametrize("overlap", [0.5, 2.0])
def test_async_all_reduce_hides_communication_under_compute(tmp_path: Path, overlap: float) -> None:
    """Compute for ``overlap`` × the all-reduce cost after starting it; wait() charges the rest only."""
    net = Net(tmp_path)
    cost = 2 * 3 * 20e-6 + 2 * 3 / 4 * 1e6 / 2e9
    tensors = {r: torch.full((N_FLOATS,), float(r)) for r in range(4)}

    def body(rank: int, comm: InProcessComm, clock: VirtualClock) -> tuple[bool, bool]:
        work = comm.all_reduce(tensors[rank], async_op=True)
        assert isinstance(work, Work)
        clock.compute(overlap * cost)
        done_before = work.is_completed()
        work.wait()
        return done_before, work.is_completed()

    out = net.run(body)
    assert all(out[r][1] for r in range(4))
    for r, c in enumerate(net.clocks):
        assert torch.equal(tensors[r], torch.full((N_FLOATS,), 6.0))
        assert c.compute_s == pytest.approx(overlap * cost, rel=1e-12)
        assert c.t == pytest.approx(max(cost, overlap * cost), rel=1e-12)
        assert c.comm_s == pytest.approx(max(0.0, cost - overlap * cost), rel=1e-9, abs=1e-15)
        assert c.idle_s == 0.0


def test_wait_on_an_operation_a_late_member_has_not_joined_yet(tmp_path: Path) -> None:
    """Rank 0 starts early and waits; the op starts when rank 1 (blocking) arrives at 5 s."""
    net = Net(tmp_path, counts=(2,))
    cost = ring(2, S)

    def body(rank: int, comm: InProcessComm, clock: VirtualClock) -> bool:
        t = torch.ones(N_FLOATS)
        if rank == 0:
            work = comm.all_reduce(t, async_op=True)
            assert work is not None
            clock.compute(1.0)
            pending = work.is_completed()
            work.wait()
            return pending
        clock.compute(5.0)
        comm.all_reduce(t)
        return False

    out = net.run(body)
    assert out[0] is False  # not completed at 1 s: the last member had not arrived
    c0, c1 = net.clocks
    assert c0.t == pytest.approx(5.0 + cost, rel=1e-12) and c1.t == pytest.approx(5.0 + cost, rel=1e-12)
    assert c0.idle_s == pytest.approx(4.0, rel=1e-12)
    assert c0.comm_s == pytest.approx(cost, rel=1e-9) and c1.comm_s == pytest.approx(cost, rel=1e-9)
    assert c0.spans[-2:] == [Span(0, "idle", 1.0, 5.0, 0), Span(0, "comm", 5.0, c0.t, 0)]


@pytest.mark.parametrize("counts", [(2,), (2, 2)])
def test_non_blocking_calls_take_inputs_at_issue_and_write_results_at_wait(
    tmp_path: Path, counts: tuple[int, ...]
) -> None:
    """torch.distributed's semantics, as the distributed engine has them: tensors changed between
    issue and ``wait()`` do not change the result, and ``wait()`` overwrites outputs changed meanwhile."""
    plugin = get_method("nonblocking_probe", root=PLUGINS)
    module = plugin.cls.train_step.__globals__
    net = Net(tmp_path, counts)
    out = net.run(lambda rank, comm, clock: module["probe"](comm, rank, net.world))
    assert out == {r: module["expected"](r, net.world) for r in range(net.world)}


# ---------------------------------------------------------------------- errors and scaling


def test_collective_kind_mismatch_is_a_clear_error(tmp_path: Path) -> None:
    net = Net(tmp_path, counts=(2,))

    def body(rank: int, comm: InProcessComm, clock: VirtualClock) -> None:
        if rank == 0:
            comm.all_reduce(torch.ones(2))
        else:
            comm.broadcast(torch.ones(2), src=0)

    with pytest.raises(RuntimeError) as info:
        net.run(body)
    msg = str(info.value)
    assert "collective mismatch on ranks [0, 1]" in msg
    assert "rank 1 called broadcast while others called all_reduce" in msg


@pytest.mark.parametrize("scale", [1.0, 3.0])
def test_bytes_scale_scales_charged_bytes_and_time(tmp_path: Path, scale: float) -> None:
    net = Net(tmp_path, bytes_scale=scale)

    def body(rank: int, comm: InProcessComm, clock: VirtualClock) -> None:
        comm.all_reduce(torch.ones(N_FLOATS))
        comm.exchange(rank ^ 1, torch.ones(N_FLOATS))  # 0<->1, 2<->3

    net.run(body)
    t = 2 * 3 * 20e-6 + 2 * 3 / 4 * scale * 1e6 / 2e9 + (20e-6 + scale * 1e6 / 2e9)
    assert [c.t for c in net.clocks] == pytest.approx([t] * 4, rel=1e-12)
    assert net.bytes_sent() == [int(1.5 * scale * S + scale * S)] * 4
    assert math.isclose(net.fabric.charged(100.0), 100.0 * scale)


# ---------------------------------------------------------------------- accounting-only charge


@pytest.mark.parametrize("pattern", ["all_reduce", "reduce_scatter", "all_gather"])
def test_charge_costs_what_the_data_moving_call_costs_and_moves_nothing(tmp_path: Path, pattern: str) -> None:
    """``Comm.charge`` (for arms whose library communicates itself) = the real op's clock and bytes."""

    def moving(rank: int, comm: InProcessComm, clock: VirtualClock) -> float:
        clock.compute(1e-3 * rank)  # staggered arrivals: the collective starts at the last one
        full = torch.ones(N_FLOATS)
        if pattern == "all_reduce":
            comm.all_reduce(full)
        elif pattern == "reduce_scatter":
            comm.reduce_scatter(torch.zeros(N_FLOATS // 4), full)
        else:
            comm.all_gather(full, torch.ones(N_FLOATS // 4))
        return clock.t

    def charged(rank: int, comm: InProcessComm, clock: VirtualClock) -> float:
        clock.compute(1e-3 * rank)
        comm.charge(pattern, S)
        return clock.t

    a, b = Net(tmp_path), Net(tmp_path)
    assert b.run(charged) == pytest.approx(a.run(moving), rel=1e-12)
    assert b.bytes_sent() == a.bytes_sent() and a.bytes_sent()[0] > 0
    with pytest.raises(ValueError, match="unknown charge pattern"):
        b.fabric.comms[0].charge("gossip", S)
