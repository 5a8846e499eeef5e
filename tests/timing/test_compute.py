"""The compute clock's per-step charge reads tables built once per model (speed only): every charge equals, bit for
bit, the expression it replaced (four method calls a step), with and without overheads, floors, speed changes
and noise; a subclass's noise still counts; a rank the profile lacks still fails naming it."""

from __future__ import annotations

from typing import Any

import pytest
from test_step_overhead import profile as one_node_profile

from distrepro.errors import ConfigError
from distrepro.hardware.profiles import HardwareProfile, load_profile
from distrepro.timing.compute import ComputeModel

pytestmark = pytest.mark.smoke


def _old_step_seconds(m: ComputeModel, rank: int, n_samples: int, step_index: int, at_s: float) -> float:
    """ComputeModel.step_seconds as written before the tables (the reference)."""
    if n_samples == 0:
        return 0.0
    overhead, floor = m.overhead_s(rank), m.floor_s(rank)
    if overhead == 0.0 and floor == 0.0:
        return n_samples / m.samples_per_s(rank, at_s) * m.noise_factor(rank, step_index)
    base = overhead + n_samples / m.declared_samples_per_s(rank)
    gpu = base / m._device(rank).speed_factor(at_s)
    return (gpu if floor == 0.0 else max(floor, gpu)) * m.noise_factor(rank, step_index)


def _profile(**group: Any) -> HardwareProfile:
    """One node of three like GPUs (test_step_overhead's builder, no overhead unless ``group`` sets one)."""
    return one_node_profile(None, count=3, throughput_samples_per_s={"w": 97.3}, **group)


PROFILES: dict[str, dict[str, Any]] = {
    "throughput alone": {},
    "overhead": {"step_overhead_ms": {"w": 3.7}},
    "floor": {"step_floor_ms": {"w": 41.0}},
    "overhead, floor and a speed change": {
        "step_overhead_ms": {"w": 3.7},
        "step_floor_ms": {"w": 9.1},
        "speed_changes": [{"at_s": 0.5, "factor": 0.37}],
    },
    "jitter and stragglers, a speed change": {
        "jitter": {"kind": "lognormal", "sigma": 0.13},
        "straggler": {"probability": 0.3, "slowdown": 2.9},
        "speed_changes": [{"at_s": 0.5, "factor": 1.7}],
    },
}


@pytest.mark.parametrize("case", list(PROFILES))
def test_every_charge_is_the_old_expression_bitwise(case: str) -> None:
    model = ComputeModel(_profile(**PROFILES[case]), "w", 1.0, ("paper", "m", 0))
    charges = [
        (model.step_seconds(r, n, i, at), _old_step_seconds(model, r, n, i, at))
        for r in range(3)
        for n in (0, 1, 7, 64, 1000)
        for i in (-3, 0, 5, 11)
        for at in (0.0, 0.5, 2.25)
    ]
    assert all(new == old for new, old in charges)  # == on floats: the same bits (no NaN here)
    assert len({new for new, _ in charges}) >= 4  # the batch sizes (and noise, speed changes) do differ


def test_a_shipped_profile_charges_as_before() -> None:
    profile = load_profile("cadp-ijcai25")
    model = ComputeModel(profile, "resnet50_in100_224", 3.1e9, ("cadp", 1))
    assert model._devices == [profile.device(r) for r in range(profile.world_size)]
    for r in range(profile.world_size):
        assert model.step_seconds(r, 32, 4, 1.0) == _old_step_seconds(model, r, 32, 4, 1.0)


def test_a_subclass_noise_still_multiplies_the_step() -> None:
    class Doubled(ComputeModel):
        def noise_factor(self, rank: int, step_index: int) -> float:
            return 2.0

    plain = ComputeModel(_profile(), "w", 1.0)
    assert Doubled(_profile(), "w", 1.0).step_seconds(1, 10, 0, 0.0) == 2.0 * plain.step_seconds(1, 10, 0, 0.0)


def test_a_rank_the_profile_lacks_is_named() -> None:
    model = ComputeModel(_profile(step_overhead_ms={"w": 1.0}), "w", 1.0)
    for rank in (3, -1):
        with pytest.raises(ConfigError, match=f"rank {rank} is out of range"):
            model.step_seconds(rank, 4, 0, 0.0)


def test_a_workloads_batch_spread_joins_the_jitter_in_quadrature() -> None:
    """``step_jitter_sigma`` is the named workload's own spread: another workload does not pay it, and on a device
    with jitter the two independent lognormals multiply (sigmas in quadrature), the mean staying 1."""
    spread = {"step_jitter_sigma": {"w": 0.04}}
    draws = range(4000)

    def factors(model: ComputeModel) -> list[float]:
        return [model.noise_factor(0, i) for i in draws]

    own = factors(ComputeModel(_profile(**spread), "w", 1.0, ("p", 0)))
    two = one_node_profile(None, count=3, throughput_samples_per_s={"w": 97.3, "v": 5.0}, **spread)
    other = factors(ComputeModel(two, "v", 1.0, ("p", 0)))
    assert set(other) == {1.0}  # no draw at all for a workload without a spread
    both = ComputeModel(_profile(**spread, jitter={"kind": "lognormal", "sigma": 0.03}), "w", 1.0, ("p", 0))
    assert both._sigma == [pytest.approx(0.05)] * 3  # hypot(0.03, 0.04)
    for sample, sigma in ((own, 0.04), (factors(both), 0.05)):
        mean = sum(sample) / len(sample)
        sd = (sum((x - mean) ** 2 for x in sample) / len(sample)) ** 0.5
        assert mean == pytest.approx(1.0, abs=0.004) and sd == pytest.approx(sigma, rel=0.06)


def test_a_batch_spread_needs_schema_2() -> None:
    with pytest.raises(ValueError, match=r"step_jitter_sigma need schema_version: 2"):  # pydantic's error
        one_node_profile(None, schema=1, step_jitter_sigma={"w": 0.01})


def test_the_loops_host_syncs_add_to_the_step() -> None:
    """``host_sync_ms`` is charged for the method's own loop (``per_step`` or ``per_bucket``), on top of
    ``max(t_floor, t_fixed + b/peak)``, unscaled by a speed change (it is the host-GPU pipeline's), and only for its
    workload; the nominal step includes it too."""
    syncs = {"host_sync_ms": {"w": {"per_step": 2.0, "per_bucket": 5.0}}}
    group = {"step_overhead_ms": {"w": 3.7}, "step_floor_ms": {"w": 41.0}, **syncs}
    changed = {**group, "speed_changes": [{"at_s": 0.5, "factor": 0.5}]}
    without = ComputeModel(_profile(**{k: v for k, v in changed.items() if k != "host_sync_ms"}), "w", 1.0)
    for loop, extra in (("per_step", 2e-3), ("per_bucket", 5e-3)):
        model = ComputeModel(_profile(**changed), "w", 1.0, (), loop)
        assert model.sync_s(1) == extra
        for n, at in ((1, 0.0), (1000, 0.0), (1000, 1.0)):  # floor-bound, GPU-bound, GPU-bound at half speed
            assert model.step_seconds(1, n, 0, at) == pytest.approx(without.step_seconds(1, n, 0, at) + extra)
        assert model.nominal_step_seconds(0, 50) == pytest.approx(without.nominal_step_seconds(0, 50) + extra)
    two = one_node_profile(None, count=3, throughput_samples_per_s={"w": 97.3, "v": 5.0}, **syncs)
    assert ComputeModel(two, "v", 1.0, (), "per_bucket").sync_s(0) == 0.0  # another workload pays none
    assert ComputeModel(_profile(**syncs), "w", 1.0).host_syncs == "per_step"  # every loop syncs once a step


def test_host_syncs_need_both_loops_and_schema_2() -> None:
    with pytest.raises(ValueError, match=r"host_sync_ms\.w: give both loops"):
        _profile(host_sync_ms={"w": {"per_step": 1.0}})
    with pytest.raises(ValueError, match=r"host_sync_ms need schema_version: 2"):
        one_node_profile(None, schema=1, host_sync_ms={"w": {"per_step": 1.0, "per_bucket": 2.0}})
