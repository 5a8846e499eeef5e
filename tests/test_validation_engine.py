"""``benchmarks/validation_engine.py``: a validation DDP point priced by the in-process engine agrees with the
analytical model that ``validate_emulator.py`` scores, so the reported out-of-sample error is the engine's too."""

from __future__ import annotations

import os
from types import ModuleType

import pytest
from benchmark_module import benchmark_module

from distrepro.hardware.profiles import read_yaml_mapping


def _module() -> ModuleType:
    return benchmark_module("validation_engine")


def _raw(module: ModuleType) -> dict:
    return read_yaml_mapping(module.DATA, "emulator validation data")


@pytest.mark.parametrize(
    "point",
    [
        "lambda-a100-resnet50-tf32-n2",  # one node, NVSwitch
        "dlperf-torch-rn50-fp32-bs128-n16",  # two nodes, one EDR HCA each, hybrid cube-mesh inside
    ],
)
def test_without_noise_the_engine_prices_a_ddp_point_as_the_analytical_model(point: str) -> None:
    """Buckets from the layer table, the reducer, contention and the collectives: the engine and the restatement the
    validation scores charge the same step (a changed charge on either side moves the ratio off 1)."""
    module = _module()
    raw = _raw(module)
    (p,) = module.engine_points(raw, [point])
    before = os.environ.get("DISTREPRO_PATH")
    row = module.price(raw, p, seeds=1, noise=False)
    assert row["engine_over_analytic"] == pytest.approx(1.0, abs=0.005), row
    assert len(row["engine_step_ms"]) == 1
    assert os.environ.get("DISTREPRO_PATH") == before  # the profile's temporary root is not left behind


def test_with_noise_the_engine_averages_its_seeds_and_stays_near_the_expectation() -> None:
    """The analytical model charges the expected slowest of p; the engine draws each step's jitter and each GPU's
    own speed per seed, so its mean over seeds lands near the expectation, not on it."""
    module = _module()
    raw = _raw(module)
    (p,) = module.engine_points(raw, ["lambda-a100-resnet50-amp-n8"])
    row = module.price(raw, p, seeds=2, noise=True)
    assert len(row["engine_step_ms"]) == 2 and row["engine_step_ms"][0] != row["engine_step_ms"][1]
    assert row["engine_over_analytic"] == pytest.approx(1.0, abs=0.02), row


def test_only_scored_ddp_points_with_a_layer_table_are_engine_points() -> None:
    module = _module()
    raw = _raw(module)
    points = module.engine_points(raw)
    assert points and all(raw["models"][p["model"]].get("workload") for p in points)
    assert {p["kind"] for p in points} == {"ddp_throughput"}
    with pytest.raises(SystemExit, match="not a scored DDP point with a layer table: no-such-point"):
        module.engine_points(raw, ["no-such-point"])


def test_the_profile_charges_the_models_workload_at_its_1gpu_rows_speed() -> None:
    module = _module()
    raw = _raw(module)
    (p,) = module.engine_points(raw, ["dle-rn50-a100-amp-n8"])
    quiet = module.engine_profile(raw, p, noise=False)
    noisy = module.engine_profile(raw, p, noise=True)
    (device,) = quiet["nodes"][0]["devices"]
    assert device["throughput_samples_per_s"] == {"resnet50_in1k_224": pytest.approx(2470.0, rel=0.01)}
    assert sum(d["count"] for n in quiet["nodes"] for d in n["devices"]) == 8
    assert "noise" not in quiet and noisy["noise"]["compute_cv"] > 0 and noisy["noise"]["gpu_cv"] > 0


def test_the_engine_cells_first_draw_is_the_one_the_validation_prices() -> None:
    """``--draws``: each Decent-DP engine cell over seeds; its first seed is the price the error bands are built on
    (the committed ``emulator_error.yaml``), and a second seed draws the GPUs' speeds anew."""
    module = _module()
    rows = module.engine_cell_draws(_raw(module), 2)
    bands = read_yaml_mapping(benchmark_module("validation_paths").ERROR_BANDS, "emulator error bands")
    committed = {c["id"]: c["predicted"] for cells in bands["cells"].values() for c in cells}
    assert {r["id"] for r in rows} == set(committed)
    for r in rows:
        assert r["ms"][0] == pytest.approx(committed[r["id"]], abs=0.01), r
        assert r["mean"] == pytest.approx(sum(r["ms"]) / 2, abs=0.01)
    assert any(r["ms"][0] != r["ms"][1] for r in rows)  # the GPUs' own speeds are drawn per seed
