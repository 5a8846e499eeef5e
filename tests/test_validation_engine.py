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
        "txl-dgx2h-base-bs16-n16",  # no shipped layer table: the even one, its tied embedding ready last
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


def test_engine_points_are_those_priced_as_the_validation_does() -> None:
    """A model with a layer table always; another only when the validation charges its point nothing the engine
    does not run (its source's own buckets, length-bucketed batches, loop work or accumulation)."""
    module = _module()
    raw = _raw(module)
    points = module.engine_points(raw)
    assert {p["kind"] for p in points} == {"ddp_throughput"}
    tabled = [p for p in points if raw["models"][p["model"]].get("workload")]
    others = [p for p in points if not raw["models"][p["model"]].get("workload")]
    assert tabled and others and all(module.own_terms(raw, p) == [] for p in others)
    left_out = [p for p in raw["points"] if p["kind"] == "ddp_throughput" and p not in points]
    assert left_out and all(module.own_terms(raw, p) for p in left_out)
    with pytest.raises(SystemExit, match="no-such-point"):
        module.engine_points(raw, ["no-such-point"])


def test_the_even_table_is_the_validations_assumption_in_layers() -> None:
    """The embedding first with no compute (ready when backward ends), then equal layers holding the rest; the
    gradient's bytes and about the model's tensor count (two a layer)."""
    module = _module()
    raw = _raw(module)
    model = raw["models"]["txl-base"]
    lines = module.even_table("t", model, model["grad_bytes"]).splitlines()
    rows = [line.split(",") for line in lines[2:]]
    assert lines[0].startswith("# [E]") and rows[0][:2] == ["embed", "embedding"] and float(rows[0][3]) == 0
    assert sum(int(r[2]) for r in rows) == round(model["grad_bytes"] / 4)
    # the engine counts 4 bytes a parameter: the table holds the gradient's bytes so, the embedding its share of them
    share = int(rows[0][2]) / sum(int(r[2]) for r in rows)
    assert share == pytest.approx(model["ready_last_params"] / model["params"], rel=1e-3)
    assert {r[3] for r in rows[1:]} == {"1.0"} and 2 * len(rows) == pytest.approx(model["tensors"], abs=2)


def test_the_profile_charges_the_workload_at_its_1gpu_rows_speed_per_proxy_sample() -> None:
    module = _module()
    raw = _raw(module)
    (p,) = module.engine_points(raw, ["dle-rn50-a100-amp-n8"])
    quiet = module.engine_profile(raw, p, False, "resnet50_in1k_224")
    noisy = module.engine_profile(raw, p, True, "resnet50_in1k_224")
    (device,) = quiet["nodes"][0]["devices"]
    assert device["throughput_samples_per_s"] == {"resnet50_in1k_224": pytest.approx(2470.0, rel=0.01)}
    (txl,) = module.engine_points(raw, ["txl-a100-base-bs32-n8"])  # 6,144 tokens: a 256-sample proxy batch
    batch, scale = module.proxy_batch(txl)
    assert batch == 256 and batch / scale == txl["tokens_per_gpu"]
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
