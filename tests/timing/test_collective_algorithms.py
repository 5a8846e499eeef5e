"""Collectives as NCCL runs them (issue 23): algorithm and protocol choice, hand-computed costs, the flat model kept.

Every expected number below is written out from the formulas of :mod:`distrepro.timing.collective_algorithms` (NCCL's
``tuning.cc`` constants: base latency 8.4 µs Simple / 6.6 µs LL, LL step latency 0.18x and bandwidth 0.5x, tree
algorithm bandwidth 0.46x the bus bandwidth) on small profiles whose links are round numbers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from distrepro.hardware.profiles import HardwareProfile
from distrepro.timing.timemodel import CommCostModel

pytestmark = pytest.mark.smoke

US = 1e-6


def link(latency_us: float, gbytes_per_s: float) -> dict[str, Any]:
    return {"latency_us": latency_us, "bandwidth_gbytes_per_s": gbytes_per_s, "source": "[E] test"}


def cluster(
    nodes: int, per_node: int, kind: str = "gpu", algorithm: str | None = None, intra_gbytes: float = 10
) -> HardwareProfile:
    """``nodes`` nodes of ``per_node`` devices: intra-node links 10 µs / 10 GB/s (or ``intra_gbytes``), one NIC per
    node 20 µs / 1 GB/s."""
    device = {"name": "d", "kind": kind, "count": per_node, "memory_gib": 16, "source": "[E] test"}
    data: dict[str, Any] = {
        "schema_version": 2,
        "name": "c",
        "description": "test",
        "nodes": [{"name": f"n{i}", "nic": link(20, 1), "devices": [device]} for i in range(nodes)],
        "network": {"intra_node": link(10, intra_gbytes), "inter_node": link(20, 1)},
    }
    if algorithm is not None:
        data["collective_algorithm"] = algorithm
    return HardwareProfile.model_validate(data)


@pytest.fixture
def tuner_counting(monkeypatch: pytest.MonkeyPatch) -> None:
    """One slice a ring step: every step's latency paid in full, as NCCL's tuner counts it (the tests of its counting
    rules; the slices' hiding has a test of its own)."""
    from distrepro.timing import collective_algorithms as coll

    monkeypatch.setattr(coll, "RING_SLICES_PER_STEP", 1)


def test_ring_on_three_nodes_counts_nccl_step_latencies_and_base(tuner_counting: None) -> None:
    """NCCL's tuner (one slice a step: nothing hidden): 12 GPUs on 3 nodes, 100 MB: 22 steps of which 2(N-1) = 4 cross
    nodes; the NIC (1 GB/s) is the ring's slowest link; a ring/Simple all-reduce across nodes on a GPU not tabled
    (taken as 8.0+) pays NCCL's plateau factor 1.4."""
    how = CommCostModel(cluster(3, 4)).collective("all_reduce", range(12), 100e6)  # auto: NCCL's pick
    assert how.algorithm == "ring" and how.protocol == "simple"
    latency = (8.4 * US + 18 * 10 * US + 4 * 20 * US) * 1.4
    assert how.latency_s == pytest.approx(latency, rel=1e-12)
    assert how.seconds == pytest.approx(latency + 2 * 11 / 12 * 100e6 / 1e9, rel=1e-12)
    assert len(how.hops) == 12  # the ring's twelve hops, for link sharing


def test_a_rings_pipelined_slices_hide_step_latency_behind_the_other_slice() -> None:
    """NCCL sends each ring step in two slices (``prims_simple.h``), so a step exposes only the latency one slice's
    transfer does not cover, and the call pays its slowest hop once. 12 GPUs on 3 nodes (intra 10 µs, NIC 20 µs,
    1 GB/s): at 100 MB a slice takes 4.2 ms and every step's latency hides; at 360 kB a slice takes 15 µs, which
    covers the intra-node steps but leaves 5 µs of each of the 4 network steps."""
    large = CommCostModel(cluster(3, 4)).collective("all_reduce", range(12), 100e6)
    assert large.algorithm == "ring" and large.protocol == "simple"
    assert large.latency_s == pytest.approx((8.4 * US + 20 * US) * 1.4, rel=1e-12)
    assert large.seconds == pytest.approx(large.latency_s + 2 * 11 / 12 * 100e6 / 1e9, rel=1e-12)
    mid = CommCostModel(cluster(3, 4)).collective("all_reduce", range(12), 360e3)
    assert mid.protocol == "simple"
    assert mid.latency_s == pytest.approx((8.4 * US + 4 * 5 * US + 15 * US) * 1.4, rel=1e-9)
    tuner = (8.4 * US + 18 * 10 * US + 4 * 20 * US) * 1.4
    assert mid.latency_s < tuner  # never more than NCCL's tuner counts
    # reduce-scatter runs the same sliced ring (11 steps, no plateau: it is not an all-reduce); a broadcast does not
    scatter = CommCostModel(cluster(3, 4)).collective("reduce_scatter", range(12), 100e6)
    assert scatter.algorithm == "ring" and scatter.latency_s == pytest.approx(8.4 * US + 20 * US, rel=1e-12)
    chain = CommCostModel(cluster(3, 4)).collective("broadcast", range(12), 100e6, src=0)
    assert chain.latency_s == pytest.approx(8.4 * US + 9 * 10 * US + 2 * 20 * US, rel=1e-12)


def test_a_tree_between_two_nodes_runs_at_up_to_twice_the_network_bandwidth() -> None:
    """Between exactly two nodes each byte crosses the network once each way and the intra-node chain twice, so a
    pinned tree is rated at its chains' bandwidth up to twice the NIC's (NCCL: ``search.cc`` raises a tree's bwIntra
    below 2 x bwInter; ``tuning.cc`` uses bwIntra when nNodes <= 2). 8 GPUs on 2 nodes, 100 MB: min(10, 2 x 1) GB/s
    x 0.46 x treeCorrectionFactor[Simple][20] = 0.8; latency: chains of 4 (3 intra steps each way), one inter-node
    level each way."""
    latency = 8.4 * US + 6 * 10 * US + 2 * 20 * US
    tree = CommCostModel(cluster(2, 4, algorithm="tree")).collective("all_reduce", range(8), 100e6)
    assert tree.algorithm == "tree" and tree.latency_s == pytest.approx(latency, rel=1e-12)
    assert tree.seconds == pytest.approx(latency + 100e6 / (2e9 * 0.92 * 0.5 * 0.8), rel=1e-12)
    # chains slower than twice the NIC bound it: intra 1.5 GB/s
    slow = CommCostModel(cluster(2, 4, algorithm="tree", intra_gbytes=1.5)).collective("all_reduce", range(8), 100e6)
    assert slow.seconds == pytest.approx(latency + 100e6 / (1.5e9 * 0.92 * 0.5 * 0.8), rel=1e-12)
    # three nodes: the slowest hop's bandwidth (the NIC's 1 GB/s), as before
    three = CommCostModel(cluster(3, 4, algorithm="tree")).collective("all_reduce", range(12), 100e6)
    assert three.seconds - three.latency_s == pytest.approx(100e6 / (1e9 * 0.92 * 0.5 * 0.8), rel=1e-12)
    # ``auto`` still rates the tree at its slowest hop (the open question of docs/emulator.md): the ring, 1 GB/s x
    # 8/14, beats 1 GB/s x 0.46 x 0.8 on two nodes
    assert CommCostModel(cluster(2, 4)).collective("all_reduce", range(8), 100e6).algorithm == "ring"


def test_small_messages_take_ll_large_ones_simple() -> None:
    cost = CommCostModel(cluster(1, 4))
    tiny = cost.collective("all_reduce", range(4), 8)
    assert tiny.protocol == "ll"
    # LL on one node: 6.6 µs + 0.18 x 6 steps x 10 µs, at half the bandwidth
    assert tiny.seconds == pytest.approx(6.6 * US + 0.18 * 60 * US + 2 * 2 * 3 / 4 * 8 / 10e9, rel=1e-12)
    assert cost.collective("all_reduce", range(4), 100e6).protocol == "simple"


def test_auto_picks_the_tree_for_small_messages_across_nodes_and_the_ring_for_large() -> None:
    cost = CommCostModel(cluster(4, 2))
    small = cost.collective("all_reduce", range(8), 4e3)
    large = cost.collective("all_reduce", range(8), 100e6)
    assert small.algorithm == "tree"
    assert large.algorithm == "ring"
    # the tree: chains of 2 per node (1 intra step up, 1 down) and log2(4) = 2 inter-node levels, twice
    tree = cost.collective("all_reduce", range(8), 100e6, algorithm="tree")
    assert tree.latency_s == pytest.approx(8.4 * US + 2 * (1 * 10 + 2 * 20) * US, rel=1e-12)
    # 100 MB = 2^20.6 x 64 B: treeCorrectionFactor[Simple][20] = 0.8 of the modelled bandwidth
    assert tree.seconds == pytest.approx(tree.latency_s + 100e6 / (1e9 * 0.92 * 0.5 * 0.8), rel=1e-12)
    assert large.seconds < tree.seconds


def test_hierarchical_sends_two_n_minus_one_over_n_through_each_nic() -> None:
    """2 nodes x 4 GPUs, 100 MB: intra reduce-scatter and all-gather (3/4 S each at 10 GB/s), inter all-reduce of the
    shards: 2(N-1)/N S = S through the 1 GB/s NIC (a flat ring sends 2(p-1)/p S = 1.75 S)."""
    cost = CommCostModel(cluster(2, 4, algorithm="hierarchical"))
    how = cost.collective("all_reduce", range(8), 100e6)
    assert how.algorithm == "hierarchical"
    bandwidth = 2 * 3 / 4 * 100e6 / 10e9 + 100e6 / 1e9
    assert how.seconds - how.latency_s == pytest.approx(bandwidth, rel=1e-12)
    assert how.latency_s == pytest.approx(8.4 * US + 6 * 10 * US + 2 * 20 * US, rel=1e-12)
    ring = cost.collective("all_reduce", range(8), 100e6, algorithm="ring")
    assert how.seconds < ring.seconds


def test_ring_pin_and_cpu_groups_keep_the_flat_model() -> None:
    """``collective_algorithm: ring`` (and any group with a CPU, gloo) charges the textbook ring: every step at the
    worst latency, no base latency: 2(p-1) alpha + 2(p-1)/p S/B."""
    expected = 2 * 7 * 20 * US + 2 * 7 / 8 * 100e6 / 1e9
    for profile in (cluster(2, 4, algorithm="ring"), cluster(2, 4, kind="cpu")):
        cost = CommCostModel(profile)
        assert cost.all_reduce(range(8), 100e6) == pytest.approx(expected, rel=1e-12)
        assert cost.collective("all_reduce", range(8), 100e6).protocol == "classic"
        # broadcast: the binomial tree, ceil(log2 8) = 3 rounds of (alpha + S/B)
        assert cost.broadcast(range(8), 0, 100e6) == pytest.approx(3 * (20 * US + 100e6 / 1e9), rel=1e-12)


def test_gpu_broadcast_is_a_pipelined_ring() -> None:
    """NCCL broadcasts along a chain: S/B once, plus one step latency per hop (6 intra, 1 inter)."""
    how = CommCostModel(cluster(2, 4)).collective("broadcast", range(8), 100e6, src=0)
    assert how.algorithm == "pipelined ring"
    assert how.latency_s == pytest.approx(8.4 * US + 6 * 10 * US + 20 * US, rel=1e-12)
    assert how.seconds == pytest.approx(how.latency_s + 100e6 / 1e9, rel=1e-12)


def test_reduce_scatter_and_all_gather_run_rings_even_when_the_tree_is_pinned(tuner_counting: None) -> None:
    cost = CommCostModel(cluster(2, 4, algorithm="tree"))
    for pattern, size in (("reduce_scatter", 80e6), ("all_gather", 10e6)):
        how = cost.collective(pattern, range(8), size)
        assert how.algorithm == "ring"
        assert how.seconds == pytest.approx(8.4 * US + (6 * 10 + 20) * US + 7 / 8 * 80e6 / 1e9, rel=1e-12)


def test_all_reduce_charge_draws_no_noise_for_the_choice_and_is_cached() -> None:
    cost = CommCostModel(cluster(2, 4))
    first = cost.collective("all_reduce", range(8), 25e6)
    assert cost.collective("all_reduce", range(8), 25e6) is first
    assert cost.all_reduce(range(8), 25e6) == first.seconds  # no link noise declared


def test_unknown_algorithm_in_a_profile_is_refused() -> None:
    with pytest.raises(Exception, match="collective_algorithm"):
        cluster(2, 2, algorithm="butterfly")


def test_the_in_process_engine_charges_the_chosen_algorithm_and_shares_its_links(tmp_path: Path) -> None:
    """On the engine (``auto``): one all-reduce alone costs exactly the model's charge; two at once on groups
    whose rings cross the same NIC share it, so each takes longer than alone (the flows carry the chosen
    algorithm's hops and bandwidth term, not a flat ring's)."""
    from lanenet import G, Net

    net = Net(tmp_path, 3, per_node=2, algorithm="auto")  # 3 nodes x 2 GPUs, 10 GB/s inside, 1 GB/s NICs
    alone = net.fabric.cost.collective("all_reduce", range(6), G)
    out = net.run(lambda r, comm, clock: comm.charge("all_reduce", G, async_op=True).wait() or clock.t)
    assert out[0] == pytest.approx(alone.seconds, rel=1e-9)
    assert alone.algorithm == "ring" and alone.protocol == "simple"

    net = Net(tmp_path, 2, per_node=2, algorithm="auto")
    pairs = [net.fabric.comms[0].new_group(g) for g in ([0, 2], [1, 3])]  # both cross the NICs

    def body(rank: int, comm: Any, clock: Any) -> float:
        comm.charge("all_reduce", G, pairs[rank % 2], async_op=True).wait()
        return clock.t

    shared = net.run(body)
    two = net.fabric.cost.collective("all_reduce", [0, 2], G)
    assert min(shared.values()) > two.seconds * 1.5  # each got about half of each NIC


@pytest.mark.parametrize(("algorithm", "nodes"), [("tree", 4), ("tree", 2), ("hierarchical", 4)])
def test_a_pinned_algorithm_alone_on_the_engine_costs_exactly_its_charge(
    tmp_path: Path, algorithm: str, nodes: int
) -> None:
    """Its flow crosses each NIC once each way (the charge's bandwidth term holds the algorithm's volume), so a
    tree over 4 or 2 nodes or a hierarchical all-reduce alone runs exactly as charged, not a NIC-share slower."""
    from lanenet import G, Net

    net = Net(tmp_path, nodes, per_node=2, algorithm=algorithm)
    how = net.fabric.cost.collective("all_reduce", range(2 * nodes), G)
    assert how.algorithm == algorithm
    out = net.run(lambda r, comm, clock: comm.charge("all_reduce", G, async_op=True).wait() or clock.t)
    assert list(out.values()) == [pytest.approx(how.seconds, rel=1e-9)] * (2 * nodes)


def _nodes(nodes: int, per_node: int, intra_us: float, inter_us: float) -> HardwareProfile:
    device = {"name": "d", "kind": "gpu", "count": per_node, "memory_gib": 16, "source": "[E] test"}
    return HardwareProfile.model_validate(
        {
            "schema_version": 2,
            "name": "c",
            "description": "test",
            "nodes": [{"name": f"n{i}", "nic": link(inter_us, 3), "devices": [device]} for i in range(nodes)],
            "network": {"intra_node": link(intra_us, 100), "inter_node": link(inter_us, 3)},
        }
    )


def test_ll_saves_the_simple_protocols_overhead_not_the_wires_latency() -> None:
    """tuning.cc hwLat NET Ring: Simple 14, LL 2.7 µs. On InfiniBand's 14 µs both rules give NCCL's 2.7 µs per network
    step; over TCP sockets (30 µs a step, the kernel's and the wire's) LL saves only Simple's 11.3 µs: 18.7 µs, not
    0.18 x 30 = 5.4 µs. Two ranks on two nodes: a ring of 2 steps, both across the NIC."""
    ib = CommCostModel(_nodes(2, 1, 3, 14)).collective("all_reduce", range(2), 8)
    assert ib.protocol == "ll" and ib.latency_s == pytest.approx(6.6 * US + 2 * 2.7 * US, rel=1e-12)
    tcp = CommCostModel(_nodes(2, 1, 3, 30)).collective("all_reduce", range(2), 8)
    assert tcp.protocol == "ll" and tcp.latency_s == pytest.approx(6.6 * US + 2 * 18.7 * US, rel=1e-12)
    # what grows with ranks over TCP: a small all-reduce's latency, LL's steps now near the wire's
    small = [CommCostModel(_nodes(n, 4, 3, 30)).collective("all_reduce", range(4 * n), 4e3).seconds for n in (2, 8, 32)]
    assert small[0] < small[1] < small[2]


def test_a_ring_across_nodes_pays_nccls_net_overhead_on_its_intra_node_steps(tuner_counting: None) -> None:
    """tuning.cc: "Inter-node rings still have to launch nsteps * net overhead": an intra-node step of a ring that
    crosses nodes takes at least 1 µs (x3 under Simple); inside one node the link's own latency stands."""
    across = CommCostModel(_nodes(3, 4, 0.5, 14)).collective("all_reduce", range(12), 100e6)
    assert (across.algorithm, across.protocol) == ("ring", "simple")
    assert across.latency_s == pytest.approx((8.4 * US + 18 * 3 * US + 4 * 14 * US) * 1.4, rel=1e-12)
    inside = CommCostModel(_nodes(1, 4, 0.5, 14)).collective("all_reduce", range(4), 100e6, algorithm="auto")
    assert inside.algorithm == "ring" and inside.latency_s == pytest.approx(8.4 * US + 6 * 0.5 * US, rel=1e-12)


def test_nccl_gives_a_nic_the_largest_speed_of_its_table_at_or_below_the_line_rate() -> None:
    """NCCL's search (``search.cc`` speedArrayInter): HDR's 25 GB/s runs at 24, EDR's 12.5 at 12 (0.96 both), a
    48 GB/s or faster NIC at 48; below the table's slowest speed is an error."""
    from distrepro.timing.nccl_tuning import nccl_net_gbytes_per_s

    assert nccl_net_gbytes_per_s(25.0) == 24.0 and nccl_net_gbytes_per_s(12.5) == 12.0
    assert nccl_net_gbytes_per_s(24.0) == 24.0 and nccl_net_gbytes_per_s(100.0) == 48.0
    assert nccl_net_gbytes_per_s(3.125) == 3.0  # 25 GbE
    assert nccl_net_gbytes_per_s(1.0) == 0.24
    with pytest.raises(ValueError, match="slowest"):
        nccl_net_gbytes_per_s(0.1)


def _named(name: str, nodes: int, per_node: int) -> HardwareProfile:
    """``nodes`` nodes of ``per_node`` GPUs called ``name``: intra 10 µs / 10 GB/s, NIC 20 µs / 1 GB/s."""
    device = {"name": name, "kind": "gpu", "count": per_node, "memory_gib": 16, "source": "[E] test"}
    return HardwareProfile.model_validate(
        {
            "schema_version": 2,
            "name": "c",
            "description": "test",
            "nodes": [{"name": f"n{i}", "nic": link(20, 1), "devices": [device]} for i in range(nodes)],
            "network": {"intra_node": link(10, 10), "inter_node": link(20, 1)},
        }
    )


def test_a_ring_all_reduce_across_nodes_pays_nccls_plateau_factor_by_compute_capability(tuner_counting: None) -> None:
    """``ncclTopoGetAlgoTime``: a ring/Simple all-reduce across nodes has its whole latency x 1.9 below compute
    capability 8.0 (a T4 is 7.5) and x 1.4 from it on (an A100 is 8.0). 12 GPUs on 3 nodes, 100 MB, ring picked
    by NCCL's rule: base 8.4 + 18 intra steps x 10 + 4 network steps x 20 = 268.4 µs before the factor."""
    base = 8.4 * US + 18 * 10 * US + 4 * 20 * US
    t4 = CommCostModel(_named("t4", 3, 4)).collective("all_reduce", range(12), 100e6)
    a100 = CommCostModel(_named("a100-node0", 3, 4)).collective("all_reduce", range(12), 100e6)
    assert (t4.algorithm, t4.protocol) == ("ring", "simple") == (a100.algorithm, a100.protocol)
    assert t4.latency_s == pytest.approx(1.9 * base, rel=1e-12)  # 510.0 µs
    assert a100.latency_s == pytest.approx(1.4 * base, rel=1e-12)  # 375.8 µs
    assert t4.seconds - t4.latency_s == pytest.approx(a100.seconds - a100.latency_s, rel=1e-12)  # bandwidth alike
    # inside one node there is no plateau: 6 steps x 10 µs + 8.4 µs, whatever the GPU
    inside = CommCostModel(_named("t4", 1, 4)).collective("all_reduce", range(4), 100e6)
    assert inside.latency_s == pytest.approx(8.4 * US + 6 * 10 * US, rel=1e-12)


def test_the_plateau_factor_needs_64_bytes_per_channel_and_rank() -> None:
    """NCCL applies the factor from 64 bytes per channel and rank; the emulator, which has no channels, assumes NCCL's
    64 at most: 8 ranks on 2 T4 nodes from 64 x 64 x 8 = 32,768 bytes; never inside one node."""
    from distrepro.timing import collective_algorithms as coll

    two_nodes = coll.Topology(_named("t4", 2, 4), tuple(range(8)))
    assert coll.plateau_of(two_nodes, 32768) == 1.9 and coll.plateau_of(two_nodes, 32767) == 1.0
    assert coll.plateau_of(coll.Topology(_named("t4", 1, 8), tuple(range(8))), 1e9) == 1.0
    assert coll.plateau_of(coll.Topology(_named("a40", 2, 4), tuple(range(8))), 1e9) == 1.4
    assert coll.ring_plateau(75) == 1.9 and coll.ring_plateau(80) == 1.4 and coll.ring_plateau(None) == 1.4
    assert coll.compute_capability("a40-node1") == 86 and coll.compute_capability("gpu_half") is None


def test_nccls_tree_correction_factor_by_protocol_and_size() -> None:
    """``treeCorrectionFactor``: the entry of log2(bytes / 64), LL and Simple rows; 1 outside 64 B-256 MiB."""
    from distrepro.timing.nccl_tuning import tree_correction

    assert tree_correction("simple", 64) == 0.9  # 2^0 x 64 B
    assert tree_correction("simple", 64 * 2**11) == 0.5  # 128 KiB
    assert tree_correction("ll", 64 * 2**12) == 0.4  # 256 KiB
    assert tree_correction("simple", 25 * 2**20) == 0.7  # a 25 MiB bucket: 2^18.6 x 64 B
    assert tree_correction("simple", 32) == 1.0 and tree_correction("simple", 2**30) == 1.0
