"""The floor what-if of Fig. 6 (``benchmarks/fig6_floor.py``) changes the host's costs (the floor and the loop's
syncs) and nothing else: its profile copies load under the shipped name, with every other figure as shipped."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmark_module import benchmark_module

from distrepro.hardware.profiles import load_profile

pytestmark = pytest.mark.smoke


def test_a_scaled_copy_differs_from_the_shipped_profile_in_its_host_costs_only(tmp_path: Path) -> None:
    module = benchmark_module("fig6_floor")
    shipped = load_profile("a100-ib-16")
    half = load_profile(module.scaled_profile("a100-ib", 16, 0.5, tmp_path))
    workload = "transformer_base_wmt14_195tok"
    assert half.name == shipped.name and half.world_size == shipped.world_size
    assert half.device(0).step_floor_ms[workload] == pytest.approx(shipped.device(0).step_floor_ms[workload] / 2)
    syncs = shipped.device(0).host_sync_ms[workload]
    assert half.device(0).host_sync_ms[workload] == {loop: pytest.approx(v / 2) for loop, v in syncs.items()}
    same = {"step_floor_ms", "host_sync_ms"}
    assert half.device(0).model_dump(exclude=same) == shipped.device(0).model_dump(exclude=same)
    assert load_profile(module.scaled_profile("a100-ib", 16, 0.0, tmp_path)).device(3).step_floor_ms[workload] == 0.0
