"""The batch-size-dependent compute model (issue 23): a step of b samples costs ``t_fixed + b / peak``."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from distrepro.hardware.profiles import HardwareProfile
from distrepro.timing.timemodel import ComputeModel

pytestmark = pytest.mark.smoke


def profile(overhead_ms: float | None = 50.0, schema: int = 2, **group: Any) -> HardwareProfile:
    device: dict[str, Any] = {
        "name": "g",
        "kind": "gpu",
        "count": 2,
        "memory_gib": 16,
        "throughput_samples_per_s": {"w": 100.0},
        "source": "[E] test",
    }
    if overhead_ms is not None:
        device["step_overhead_ms"] = {"w": overhead_ms}
    device.update(group)
    link = {"latency_us": 10, "bandwidth_gbytes_per_s": 10, "source": "[E] test"}
    return HardwareProfile.model_validate(
        {
            "schema_version": schema,
            "name": "p",
            "description": "test",
            "nodes": [{"name": "n", "devices": [device]}],
            "network": {"intra_node": link, "inter_node": link},
        }
    )


def test_step_is_fixed_cost_plus_batch_over_peak() -> None:
    compute = ComputeModel(profile(50.0), "w", 1.0)
    assert compute.step_seconds(0, 10, 0, 0.0) == pytest.approx(0.05 + 10 / 100.0, rel=1e-12)
    assert compute.nominal_step_seconds(1, 1) == pytest.approx(0.06, rel=1e-12)
    assert compute.overhead_s(0) == pytest.approx(0.05)
    assert compute.step_seconds(0, 0, 0, 0.0) == 0.0  # no samples, no step
    # small batches are latency-bound: per-sample time at b = 1 is 6x that at the large-batch limit
    assert compute.nominal_step_seconds(0, 1) / (1 / 100.0) == pytest.approx(6.0)


def test_a_speed_change_slows_the_whole_step() -> None:
    compute = ComputeModel(profile(50.0, speed_changes=[{"at_s": 1.0, "factor": 0.5}]), "w", 1.0)
    assert compute.step_seconds(0, 10, 0, 2.0) == pytest.approx(2 * (0.05 + 0.1), rel=1e-12)


def test_without_an_overhead_the_old_charge_is_unchanged_bitwise() -> None:
    compute = ComputeModel(profile(None, schema=1), "w", 1.0)
    assert compute.step_seconds(0, 7, 3, 0.0) == 7 / 100.0
    assert compute.overhead_s(0) == 0.0


def test_an_overhead_for_another_workload_does_not_apply() -> None:
    compute = ComputeModel(profile(50.0, effective_flops_per_s=1e12), "other", 1e9)
    assert compute.overhead_s(0) == 0.0


def test_step_overhead_needs_schema_2() -> None:
    with pytest.raises(ValidationError, match="step_overhead_ms need schema_version: 2"):
        profile(50.0, schema=1)


def test_overhead_range_must_contain_one_and_needs_an_overhead() -> None:
    with pytest.raises(ValidationError, match="must contain 1"):
        profile(50.0, ranges={"overhead": {"low": 1.1, "high": 2.0, "reason": "test"}})
    with pytest.raises(ValidationError, match="no step_overhead_ms"):
        profile(None, ranges={"overhead": {"low": 0.5, "high": 2.0, "reason": "test"}})


def test_an_estimated_overhead_without_a_range_is_listed() -> None:
    assert any(f.endswith(".overhead") for f in profile(50.0).unranged_estimates())
    ranged = profile(
        50.0,
        ranges={
            "overhead": {"low": 0.5, "high": 2.0, "reason": "test"},
            "speed": {"low": 0.5, "high": 2.0, "reason": "test"},
        },
    )
    assert not [f for f in ranged.unranged_estimates() if f.startswith("nodes")]


def test_a_sensitivity_sweep_scales_overhead_and_speed_apart() -> None:
    from distrepro.sensitivity.space import apply_to_profile

    base = profile(
        50.0,
        ranges={
            "overhead": {"low": 0.5, "high": 2.0, "reason": "test", "name": "o"},
            "speed": {"low": 0.5, "high": 2.0, "reason": "test", "name": "s"},
        },
    )
    moved = apply_to_profile(base, {"o": 2.0, "s": 0.5})
    group = moved.nodes[0].devices[0]
    assert group.step_overhead_ms == {"w": 100.0}
    assert group.throughput_samples_per_s == {"w": 50.0}
    compute = ComputeModel(moved, "w", 1.0)
    assert compute.nominal_step_seconds(0, 10) == pytest.approx(0.1 + 10 / 50.0, rel=1e-12)


def test_a_sensitivity_sweep_moves_a_node_nic_with_its_named_range() -> None:
    """A node's shared NIC (schema 2) ranged under the inter-node link's variable moves with it: before issue 23
    the sweep set ``network.inter_node`` only, and the node NIC (the link's cap and the flows' capacity) stayed."""
    from distrepro.sensitivity.space import apply_to_profile

    rng = {"bandwidth_gbytes_per_s": {"low": 1.0, "high": 4.0, "reason": "test", "name": "nic.bw"}}
    nic = {"latency_us": 10, "bandwidth_gbytes_per_s": 2.0, "source": "[E] test", "ranges": rng}
    device = {
        "name": "g",
        "kind": "gpu",
        "count": 1,
        "memory_gib": 16,
        "effective_flops_per_s": 1e12,
        "source": "[S] t",
    }
    base = HardwareProfile.model_validate(
        {
            "schema_version": 2,
            "name": "p",
            "description": "test",
            "nodes": [{"name": f"n{i}", "nic": nic, "devices": [device]} for i in range(2)],
            "network": {"intra_node": nic, "inter_node": nic},
        }
    )
    moved = apply_to_profile(base, {"nic.bw": 4.0})
    assert [n.nic.bandwidth_gbytes_per_s for n in moved.nodes if n.nic is not None] == [4.0, 4.0]
    assert moved.link(0, 1).bandwidth_bytes_per_s == 4.0e9


# ---------------------------------------------------------------------- the host floor (issue 44)


def test_a_host_floor_bounds_a_small_step_and_leaves_a_large_one() -> None:
    """``max(t_floor, t_fixed + b / peak)``: a small per-GPU batch waits on the host, a large one does not."""
    compute = ComputeModel(profile(10.0, step_floor_ms={"w": 40.0}), "w", 1.0)
    assert compute.floor_s(0) == pytest.approx(0.04)
    assert compute.nominal_step_seconds(0, 1) == pytest.approx(0.04, rel=1e-12)  # 10 + 10 ms < 40 ms: the floor
    assert compute.step_seconds(0, 10, 0, 0.0) == pytest.approx(0.01 + 0.1, rel=1e-12)  # 110 ms > 40 ms
    # strong scaling: below the floor, halving the batch (2 samples to 1) saves nothing; above it, it does
    assert compute.nominal_step_seconds(0, 2) == compute.nominal_step_seconds(0, 1)
    assert compute.nominal_step_seconds(0, 8) > compute.nominal_step_seconds(0, 4)


def test_a_slower_gpu_does_not_slow_the_host_floor() -> None:
    compute = ComputeModel(
        profile(10.0, step_floor_ms={"w": 40.0}, speed_changes=[{"at_s": 1.0, "factor": 0.5}]), "w", 1.0
    )
    assert compute.step_seconds(0, 1, 0, 2.0) == pytest.approx(0.04, rel=1e-12)  # 2 x 20 ms = 40: still the floor
    assert compute.step_seconds(0, 3, 0, 2.0) == pytest.approx(2 * 0.04, rel=1e-12)  # the GPU's 80 ms


def test_a_floor_needs_schema_2_and_an_overhead_range_may_scale_it_alone() -> None:
    with pytest.raises(ValidationError, match="step_floor_ms need schema_version: 2"):
        profile(None, schema=1, step_floor_ms={"w": 40.0})
    ranged = profile(None, step_floor_ms={"w": 40.0}, ranges={"overhead": {"low": 0.5, "high": 2.0, "reason": "t"}})
    assert ranged.nodes[0].devices[0].step_floor_ms == {"w": 40.0}
    assert any(f.endswith(".overhead") for f in profile(None, step_floor_ms={"w": 40.0}).unranged_estimates())


def test_a_sensitivity_sweep_scales_the_floor_with_the_overhead() -> None:
    from distrepro.sensitivity.space import apply_to_profile

    rng = {"overhead": {"low": 0.5, "high": 2.0, "reason": "test", "name": "o"}}
    moved = apply_to_profile(profile(10.0, step_floor_ms={"w": 40.0}, ranges=rng), {"o": 0.5})
    group = moved.nodes[0].devices[0]
    assert (group.step_overhead_ms, group.step_floor_ms) == ({"w": 5.0}, {"w": 20.0})
