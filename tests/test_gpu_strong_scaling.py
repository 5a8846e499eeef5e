"""The GPU check of the compute model (``benchmarks/gpu_strong_scaling.py``) judges a measurement by the rule the
prediction was committed with, before any GPU step was timed: ``max(host floor + optimizer, t_fixed + tokens x
per-token cost)``, DDP adding its reducer's cost, and an error whose + means predicted too fast. The GPU itself is
not needed for that: the timings are stood in for here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmark_module import benchmark_module

pytestmark = pytest.mark.smoke

REPO = Path(__file__).resolve().parents[1]
PREDICTION = REPO / "benchmarks" / "data" / "h200" / "strong_scaling_prediction.json"


def test_the_committed_prediction_is_the_datasheet_roofline_of_the_authors_step() -> None:
    module = benchmark_module("gpu_strong_scaling")
    committed = json.loads(PREDICTION.read_text(encoding="utf-8"))
    flops, bandwidth = module.eager_step.GPUS[committed["gpu"]]
    assert committed["datasheet"] == {"fp16_tensor_flops": flops, "memory_bytes_per_s": bandwidth}
    assert committed["roofline"]["params"] == 63_145_984 and committed["gradient_tensors"] == 185
    # memory-bound: the per-token cost is at least the token's bytes at 0.8 of the datasheet bandwidth
    floor_us = committed["roofline"]["bytes_per_token"] / (module.eager_step.ETA_MEM * bandwidth) * 1e6
    assert committed["per_token_us"] >= floor_us


def test_a_row_is_judged_by_the_committed_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    module = benchmark_module("gpu_strong_scaling")
    prediction = {"t_fixed_ms": 5.0, "per_token_us": 2.0, "optimizer_ms": 1.0, "ddp_reducer_ms": 1.5}
    walls = {"plain": [30.0, 31.0, 29.0], "ddp": [33.0, 33.0, 33.0]}
    monkeypatch.setattr(module, "_time", lambda arm, batch, steps: (walls[arm[0]], 2.0))
    arms = {"plain": ("plain",), "ddp": ("ddp",)}
    big = module._row(1, 12_480, arms, prediction, 20.0, "cpu", 1, 3)
    assert big["predicted_ms"] == pytest.approx(5.0 + 12_480 * 2e-3) and big["bound"] == "roofline"
    assert big["measured_ms"] == 30.0 and big["error"] == pytest.approx(30.0 / 29.96 - 1, abs=1e-4)
    assert big["ddp_predicted_ms"] == pytest.approx(29.96 + 1.5) and big["ddp_minus_plain_ms"] == 3.0
    small = module._row(64, 390, arms, prediction, 20.0, "cpu", 1, 3)
    assert small["predicted_ms"] == 20.0 and small["bound"] == "host floor"
    assert small["error"] > 0  # measured slower than predicted: predicted too fast


def test_the_per_gpu_batches_are_whole_sentences_of_the_fig6_global_batch() -> None:
    module = benchmark_module("gpu_strong_scaling")
    tokens = [module.tokens_per_gpu(p) for p in module.GPU_COUNTS]
    assert tokens == [24_990, 12_480, 6_240, 3_120, 1_560, 780, 390]
    assert all(t % module.LENGTH == 0 for t in tokens)


def test_the_summary_judges_each_run_by_its_own_floor_and_reports_medians_and_ranges() -> None:
    module = benchmark_module("gpu_strong_scaling")
    prediction = {"t_fixed_ms": 5.0, "per_token_us": 2.0}

    def run(floor: float, measured: float, error: float, ddp: float) -> dict:
        row = {"gpus": 64, "tokens": 390, "measured_ms": measured, "error": error, "bound": "host floor"}
        return {"prediction": prediction, "t_floor_ms": floor, "rows": [row | {"ddp_minus_plain_ms": ddp}]}

    table = module.summarize([run(20.0, 60.0, 2.0, 5.0), run(40.0, 70.0, 0.75, -1.0), run(30.0, 65.0, 1.17, 9.0)])
    assert "host floor + optimizer as measured on each machine: 20.0, 40.0, 30.0 ms" in table
    row = table.splitlines()[-1]
    assert row.startswith("| 64 | 390 | 5.8 |")  # the roofline at 390 tokens: 5 + 390 x 2 us
    assert "65.0 (60.0 .. 70.0)" in row and "+117 (+75 .. +200) %" in row and "5.0 (-1.0 .. 9.0)" in row


def test_the_measured_runs_committed_are_the_prediction_they_were_judged_against() -> None:
    module = benchmark_module("gpu_strong_scaling")
    committed = json.loads(PREDICTION.read_text(encoding="utf-8"))
    runs = sorted(PREDICTION.parent.glob("strong_scaling_measured_*.json"))
    assert len(runs) == 4
    for path in runs:
        run = json.loads(path.read_text(encoding="utf-8"))
        assert run["prediction"] == committed and run["environment"]["name"] == "NVIDIA H200"
        assert [r["tokens"] for r in run["rows"]] == [module.tokens_per_gpu(p) for p in module.GPU_COUNTS]
        for row in run["rows"]:  # each row's prediction is the committed rule at that run's own floor
            roofline = committed["t_fixed_ms"] + row["tokens"] * committed["per_token_us"] / 1e3
            assert row["predicted_ms"] == pytest.approx(max(run["t_floor_ms"], roofline), abs=0.01)
