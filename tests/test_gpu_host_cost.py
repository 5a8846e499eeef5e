"""``benchmarks/gpu_host_cost.py`` separates a small CUDA step's host time into the launch path and the rest; its
parts run here on the CPU (the GPU is not needed to check what they compute)."""

from __future__ import annotations

import pytest
from benchmark_module import benchmark_module

pytestmark = pytest.mark.smoke


def test_the_launch_cost_is_per_call_cpu_and_wall_time() -> None:
    module = benchmark_module("gpu_host_cost")
    cost = module.launch_us("cpu", calls=200, reps=2)
    # what it reports, not how fast this machine is: positive and rounded, no time bound (the machine may be loaded)
    assert set(cost) == {"cpu_us", "wall_us"} and all(v > 0 and round(v, 2) == v for v in cost.values())


def test_the_paired_reading_is_the_step_over_the_floor_of_the_same_round(monkeypatch: pytest.MonkeyPatch) -> None:
    module = benchmark_module("gpu_host_cost")
    floors = iter([20.0, 40.0, 25.0])
    steps = iter([[1.0], [30.0, 31.0, 29.0], [50.0], [40.0]])  # the first call is the warm-up
    monkeypatch.setattr(module.scaling, "_model", lambda device: ("arm",))
    monkeypatch.setattr(module.scaling, "_batch", lambda tokens, device: ("batch",))
    monkeypatch.setattr(module.scaling, "_time", lambda arm, batch, n: (next(steps, [0.0]), 0.0))
    eager_step = benchmark_module("eager_step")
    monkeypatch.setattr(eager_step, "host_floor", lambda steps, reps: {"host_floor_ms": next(floors)})
    paired = module.paired_with_floor("cpu", rounds=3, steps=3)
    assert paired["floor_ms"] == [20.0, 40.0, 25.0] and paired["step_ms"] == [30.0, 50.0, 40.0]
    assert paired["step_over_floor"] == [1.5, 1.25, 1.6] and paired["median_step_over_floor"] == 1.5


def test_the_profiles_overhead_range_spans_the_cuda_host_path_measured_on_the_lent_gpus() -> None:
    """The Decent-DP profiles' ``overhead`` range cites the toy-width reading (a CUDA step's host path over the
    CPU-tensor derivation): its top must reach the largest ratio measured, and the cited span is the data's."""
    import json
    from pathlib import Path

    from distrepro.hardware.profiles import load_profile

    repo = Path(__file__).resolve().parents[1]
    toy = json.loads((repo / "benchmarks/data/h200/host_cost_toy.json").read_text(encoding="utf-8"))["toy_widths"]
    ratios = toy["device_over_recipe_cpu"]
    cited = f"{min(ratios):.2f}-{max(ratios):.2f} x the CPU-tensor derivation"
    names = [f"{c}-{n}" for c, ns in {"t4-ib": (16, 32, 64), "a100-ib": (8, 16, 32), "a40-25gbe": (8, 16, 32)}.items()
             for n in ns]  # fmt: skip
    for name in [*names, "a40-25gbe-16-jitter"]:
        overhead = load_profile(repo / "hardware_profiles" / f"{name}.yaml").device(0).ranges["overhead"]
        assert overhead.high >= max(ratios) and cited in overhead.reason, name
