"""The cost model against hand-computed numbers; noise statistics and determinism."""

from __future__ import annotations

import math
import random
import statistics
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from distrepro.errors import ConfigError
from distrepro.hardware.profiles import HardwareProfile, load_profile
from distrepro.hardware.workloads import get_workload
from distrepro.timing.timemodel import CommCostModel, ComputeModel

pytestmark = pytest.mark.smoke

MB100 = 100e6  # 100 MB = 1e8 bytes


def link(latency_us: float, gbytes_per_s: float) -> dict[str, Any]:
    return {"latency_us": latency_us, "bandwidth_gbytes_per_s": gbytes_per_s, "source": "[E] test"}


def flat(
    n: int,
    latency_us: float = 10,
    gbytes_per_s: float = 10,
    server: dict[str, Any] | None = None,
    **group: Any,
) -> dict[str, Any]:
    """``n`` identical GPUs on one node, every link (latency_us, gbytes_per_s)."""
    device = {"name": "g", "kind": "gpu", "count": n, "memory_gib": 24, "source": "[E] test"}
    device.update(group)
    network: dict[str, Any] = {"intra_node": link(latency_us, gbytes_per_s), "inter_node": link(80, 1.1)}
    if server is not None:
        network["server"] = server
    return {
        "schema_version": 1,
        "name": f"flat{n}",
        "collective_algorithm": "ring",  # the hand computations below are the flat model's (auto: NCCL's rule)
        "description": "test",
        "nodes": [{"name": "n0", "devices": [device]}],
        "network": network,
    }


def two_nodes() -> HardwareProfile:
    """Ranks 0-1 on node a (10 us, 10 GB/s); ranks 2-3 on node b behind a 200 us, 1 GB/s NIC."""
    data = flat(2)
    slow = dict(data["nodes"][0]["devices"][0], nic=link(200, 1))
    data["nodes"].append({"name": "b", "devices": [slow]})
    data["network"]["inter_node"] = link(50, 2)
    return HardwareProfile.model_validate(data)


# ---------------------------------------------------------------------- collectives


def test_ring_all_reduce_hand_computed() -> None:
    comm = CommCostModel(HardwareProfile.model_validate(flat(4)))
    # p=4, S=1e8 B, B=1e10 B/s, α=1e-5 s: 2·3·1e-5 + 2·3/4·1e8/1e10 = 6e-5 + 1.5·0.01 = 0.01506
    assert comm.ring_all_reduce([0, 1, 2, 3], MB100) == pytest.approx(0.01506, rel=1e-12)
    # p=2: 2·1·1e-5 + 2·1/2·0.01 = 0.01002
    assert comm.ring_all_reduce([2, 0], MB100) == pytest.approx(0.01002, rel=1e-12)
    assert comm.ring_all_reduce([3], MB100) == 0.0


def test_ring_uses_worst_link() -> None:
    comm = CommCostModel(two_nodes())
    # the ring 0-1-2-3-0 crosses the NIC-capped links: α = 200 us, B = 1 GB/s
    # 2·3·2e-4 + 1.5·1e8/1e9 = 0.0012 + 0.15 = 0.1512
    assert comm.ring_all_reduce([0, 1, 2, 3], MB100) == pytest.approx(0.1512, rel=1e-12)
    # a group inside node a never touches the NIC: 0.01002 as in the flat case
    assert comm.ring_all_reduce([0, 1], MB100) == pytest.approx(0.01002, rel=1e-12)


def test_all_gather_and_reduce_scatter_hand_computed() -> None:
    comm = CommCostModel(HardwareProfile.model_validate(flat(4)))
    # S_total = 4·25e6 = 1e8: 3·1e-5 + 3/4·0.01 = 3e-5 + 0.0075 = 0.00753
    assert comm.all_gather([0, 1, 2, 3], 25e6) == pytest.approx(0.00753, rel=1e-12)
    assert comm.reduce_scatter([0, 1, 2, 3], MB100) == pytest.approx(0.00753, rel=1e-12)
    # all-reduce = reduce-scatter + all-gather of the same vector
    assert comm.ring_all_reduce([0, 1, 2, 3], MB100) == pytest.approx(
        comm.reduce_scatter([0, 1, 2, 3], MB100) + comm.all_gather([0, 1, 2, 3], MB100 / 4)
    )


def test_broadcast_tree_levels() -> None:
    comm = CommCostModel(HardwareProfile.model_validate(flat(5)))
    # 5 ranks: ⌈log2 5⌉ = 3 levels of (1e-5 + 1e8/1e10) = 3·0.01001 = 0.03003
    assert comm.broadcast([0, 1, 2, 3, 4], 2, MB100) == pytest.approx(0.03003, rel=1e-12)
    # 4 ranks: 2 levels; 2 ranks: 1 level; alone: free
    assert comm.broadcast([0, 1, 2, 3], 0, MB100) == pytest.approx(0.02002, rel=1e-12)
    assert comm.broadcast([3, 4], 4, MB100) == pytest.approx(0.01001, rel=1e-12)
    assert comm.broadcast([1], 1, MB100) == 0.0
    with pytest.raises(ValueError, match="not in the group"):
        comm.broadcast([0, 1], 4, MB100)


def test_broadcast_worst_link_is_on_the_tree() -> None:
    comm = CommCostModel(two_nodes())
    # tree from 0 over (0,1,2,3): round 0 0→1, round 1 0→2 and 1→3: NIC links (200 us, 1 GB/s)
    # 2·(2e-4 + 1e8/1e9) = 0.2004
    assert comm.broadcast([0, 1, 2, 3], 0, MB100) == pytest.approx(0.2004, rel=1e-12)


def test_p2p_exchange_and_bytes_scale() -> None:
    profile = two_nodes()
    # link(1,2): inter (50 us, 2 GB/s) capped by NIC (200 us, 1 GB/s): 2e-4 + 0.1 = 0.1002
    assert CommCostModel(profile).p2p(1, 2, MB100) == pytest.approx(0.1002, rel=1e-12)
    assert CommCostModel(profile).exchange(2, 1, MB100) == pytest.approx(0.1002, rel=1e-12)
    # proxy bytes × 2: 2e-4 + 0.2
    assert CommCostModel(profile, bytes_scale=2.0).p2p(1, 2, MB100) == pytest.approx(0.2002, rel=1e-12)
    with pytest.raises(ValueError, match="itself"):
        CommCostModel(profile).p2p(1, 1, MB100)


def test_a_swap_is_one_message_on_gloo_and_on_nccl() -> None:
    """Both directions at once: NCCL coalesces them; on gloo the engines post the receive first (shaped links
    measured S/B that way, 2·S/B posted send first)."""
    data = two_nodes().model_dump(mode="json", exclude_none=True)
    cpus = dict(data, nodes=[dict(n, devices=[dict(d, kind="cpu") for d in n["devices"]]) for n in data["nodes"]])
    gloo = HardwareProfile.model_validate(cpus)
    assert (gloo.backend(), two_nodes().backend()) == ("gloo", "nccl")
    for profile in (gloo, two_nodes()):
        assert CommCostModel(profile).exchange(2, 1, MB100) == pytest.approx(0.1002, rel=1e-12)  # α + S/B
        assert CommCostModel(profile).p2p(1, 2, MB100) == pytest.approx(0.1002, rel=1e-12)


def test_parameter_server_server_bound() -> None:
    profile = HardwareProfile.model_validate(flat(8, server=link(80, 1.1)))
    comm = CommCostModel(profile)
    s = 44.9e6  # resnet18_in100_224 gradient
    # server: 2·8e-5 + 2·8·44.9e6/1.1e9 = 1.6e-4 + 0.6530909… = 0.6532509…
    # worker: 2·(8e-5 + 44.9e6/1.1e9) = 0.0817963…, smaller
    assert comm.parameter_server(range(8), s) == pytest.approx(1.6e-4 + 16 * s / 1.1e9, rel=1e-12)
    assert comm.parameter_server(range(8), s) == pytest.approx(0.65325091, rel=1e-7)
    # one worker: both terms are 2(α + S/B) = 0.0817963…
    assert comm.parameter_server([3], s) == pytest.approx(0.08179636, rel=1e-7)


def test_parameter_server_worker_bound_by_slow_nic() -> None:
    data = flat(7, server=link(80, 1.1))
    data["nodes"].append(
        {"name": "far", "devices": [dict(data["nodes"][0]["devices"][0], count=1, nic=link(500, 0.011))]}
    )
    comm = CommCostModel(HardwareProfile.model_validate(data))
    s = 44.9e6
    # rank 7 behind an 88 Mbit/s NIC: 2·(5e-4 + 44.9e6/1.1e7) = 2·(5e-4 + 4.0818…) = 8.16463…
    assert comm.parameter_server(range(8), s) == pytest.approx(8.16463636, rel=1e-7)


def test_control_is_max_latency() -> None:
    comm = CommCostModel(two_nodes())
    assert comm.control([0, 1, 2, 3]) == pytest.approx(200e-6)
    assert comm.control([1, 0]) == pytest.approx(10e-6)
    assert comm.control([2]) == 0.0


def test_bad_comm_arguments() -> None:
    comm = CommCostModel(two_nodes())
    with pytest.raises(ValueError, match="twice"):
        comm.ring_all_reduce([0, 1, 1], MB100)
    with pytest.raises(ValueError, match=">= 0"):
        comm.p2p(0, 1, -1)
    with pytest.raises(ValueError):
        CommCostModel(two_nodes(), bytes_scale=0)


# ---------------------------------------------------------------------- compute


def test_declared_speed_from_table_or_flops() -> None:
    profile = load_profile("homogeneous-4")
    table = ComputeModel(profile, "resnet50_in100_224", 24.29e9, ("t",))
    assert table.samples_per_s(0) == 470
    assert table.step_seconds(0, 47, step_index=0, at_s=0.0) == pytest.approx(0.1)  # 47 / 470
    cifar = get_workload("resnet18_cifar_32")
    derived = ComputeModel(profile, cifar.name, cifar.train_flops_per_sample, ("t",))
    # not in the 3090 table: 1.1416e13 / 3.33e9 = 3428.228… samples/s
    assert derived.samples_per_s(3) == pytest.approx(1.1416e13 / 3.33e9)
    assert derived.step_seconds(3, 64, 0, 0.0) == pytest.approx(64 * 3.33e9 / 1.1416e13)


def test_cadp_cpu_is_much_slower_than_gpu() -> None:
    model = ComputeModel(load_profile("cadp-ijcai25"), "resnet18_in100_224", 10.65e9, ("t",))
    assert [model.samples_per_s(r) for r in (0, 4, 5, 6, 7)] == [1600, 12, 12, 39, 22]


def test_device_without_any_speed_names_file_and_field(tmp_path: Path) -> None:
    data = flat(2)
    data["nodes"].append({"name": "m", "devices": [dict(data["nodes"][0]["devices"][0], name="cpu", kind="cpu")]})
    data["nodes"][0]["devices"][0]["effective_flops_per_s"] = 1e12
    path = tmp_path / "nospeed.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        ComputeModel(load_profile(path), "resnet18_cifar_32", 3.33e9, ())
    assert info.value.field == "nodes[1].devices[0]"
    assert str(path) in str(info.value) and "resnet18_cifar_32" in str(info.value)


def test_speed_change_halves_speed_after_at_s() -> None:
    profile = HardwareProfile.model_validate(
        flat(2, effective_flops_per_s=1e12, speed_changes=[{"at_s": 100.0, "factor": 0.5}])
    )
    model = ComputeModel(profile, None, 1e9, ("t",))  # 1000 samples/s declared
    assert model.samples_per_s(0, at_s=99.9) == pytest.approx(1000)
    assert model.samples_per_s(0, at_s=100.0) == pytest.approx(500)
    before = model.step_seconds(0, 100, step_index=7, at_s=50.0)
    after = model.step_seconds(0, 100, step_index=7, at_s=150.0)
    assert before == pytest.approx(0.1) and after == pytest.approx(0.2)


def jitter_model(sigma: float, parts: tuple[object, ...] = ("run", 0), **extra: Any) -> ComputeModel:
    profile = HardwareProfile.model_validate(
        flat(2, effective_flops_per_s=1e12, jitter={"kind": "lognormal", "sigma": sigma}, **extra)
    )
    return ComputeModel(profile, None, 1e9, parts)  # base step for 100 samples: 0.1 s


def test_jitter_has_mean_one_and_requested_sigma() -> None:
    model = jitter_model(0.3)
    factors = [model.step_seconds(1, 100, i, 0.0) / 0.1 for i in range(20_000)]
    # lognormal(−σ²/2, σ): mean 1 (without the −σ²/2 it would be e^0.045 ≈ 1.046); SE ≈ 0.0022
    assert statistics.fmean(factors) == pytest.approx(1.0, abs=0.01)
    logs = [math.log(f) for f in factors]
    assert statistics.fmean(logs) == pytest.approx(-0.045, abs=0.01)
    assert statistics.stdev(logs) == pytest.approx(0.3, abs=0.01)


def test_noise_is_deterministic_and_seed_dependent() -> None:
    a, b, other = jitter_model(0.2), jitter_model(0.2), jitter_model(0.2, ("run", 1))
    seq_a = [a.step_seconds(0, 10, i, 0.0) for i in range(50)]
    assert seq_a == [b.step_seconds(0, 10, i, 0.0) for i in range(50)]
    assert seq_a != [other.step_seconds(0, 10, i, 0.0) for i in range(50)]
    assert seq_a != [a.step_seconds(1, 10, i, 0.0) for i in range(50)]  # ranks draw separately


def test_noise_does_not_touch_global_rngs() -> None:
    model = jitter_model(0.2, straggler={"probability": 0.5, "slowdown": 2})
    random.seed(123)
    torch.manual_seed(123)
    expected = (random.random(), torch.rand(1).item())
    random.seed(123)
    torch.manual_seed(123)
    for i in range(10):
        model.step_seconds(0, 10, i, 0.0)
    assert (random.random(), torch.rand(1).item()) == expected


def test_straggler_probability_and_slowdown() -> None:
    profile = HardwareProfile.model_validate(
        flat(1, effective_flops_per_s=1e12, straggler={"probability": 0.1, "slowdown": 3.0})
    )
    model = ComputeModel(profile, None, 1e9, ("s",))
    times = [model.step_seconds(0, 100, i, 0.0) for i in range(20_000)]
    # without jitter every step is exactly 0.1 s or 0.3 s; SE of the fraction ≈ 0.0021
    assert {round(t, 12) for t in times} == {0.1, 0.3}
    assert sum(t > 0.2 for t in times) / len(times) == pytest.approx(0.1, abs=0.01)


def test_no_noise_declared_means_constant_steps() -> None:
    model = ComputeModel(load_profile("hetero-2fast-2slow"), "resnet50_in100_224", 24.29e9, ("x",))
    assert {model.step_seconds(2, 47, i, 0.0) for i in range(100)} == {47 / 235}
    assert model.step_seconds(2, 0, 0, 0.0) == 0.0
    with pytest.raises(ValueError):
        model.step_seconds(2, -1, 0, 0.0)
