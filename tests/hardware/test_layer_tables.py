"""The emulated workloads' per-layer tables (issue 33): traced on the meta device, stored with their source."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import torch

from distrepro.errors import ConfigError
from distrepro.hardware.layer_tables import read_table, trace, write_table
from distrepro.hardware.traced_models import ARCHITECTURES
from distrepro.hardware.workloads import load_workloads


def test_regenerating_a_table_gives_the_stored_one(tmp_path: Path) -> None:
    """The stored ResNet-50 table is what the command in its header makes today."""
    workload = load_workloads()["resnet50_in100_224"]
    stored = workload.layers
    assert stored is not None and "tools/trace_layers.py" in Path(workload.layers_file).read_text(encoding="utf-8")
    build, sample = ARCHITECTURES["resnet50_in100_224"]
    fresh = trace(build, sample, "test")
    write_table(fresh, tmp_path / "t.csv", "test")
    assert read_table(tmp_path / "t.csv").layers == stored.layers


@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_every_table_matches_its_workloads_size_and_flops(name: str) -> None:
    """Parameters match the table's ``param_bytes`` (FP32) within 0.5 %; 3 x forward FLOPs its training FLOPs within
    10 % (the table's text workloads count 6N per token; the trace also counts attention and the output layer)."""
    workload = load_workloads()[name]
    table = workload.layers
    assert table is not None
    assert 4 * table.params == pytest.approx(workload.param_bytes, rel=5e-3)
    assert 3 * table.forward_flops == pytest.approx(workload.train_flops_per_sample, rel=0.10)


def test_grouped_convolutions_are_counted_per_group() -> None:
    """A depthwise 3x3 convolution over 64 channels costs 64x less than a dense one of the same shape."""

    def dense() -> torch.nn.Module:
        return torch.nn.Sequential(torch.nn.Conv2d(64, 64, 3, padding=1, bias=False))

    def depthwise() -> torch.nn.Module:
        return torch.nn.Sequential(torch.nn.Conv2d(64, 64, 3, padding=1, groups=64, bias=False))

    a = trace(dense, (64, 8, 8), "t").forward_flops
    b = trace(depthwise, (64, 8, 8), "t").forward_flops
    assert a == 2 * 64 * 64 * 9 * 64 and b * 64 == a


def test_a_tied_embedding_belongs_to_its_first_use() -> None:
    """GPT-2's output projection shares the token embedding: counted once, at the embedding (ready last)."""
    table = load_workloads()["gpt2_small_owt_1024tok"].layers
    assert table is not None
    first, last = table.layers[0], table.layers[-1]
    assert first.name == "wte" and first.params == 50_304 * 768
    assert last.name == "lm_head" and last.params == 0
    assert last.forward_flops == pytest.approx(2 * 768 * 50_304 * 1024, rel=1e-5)  # stored to 6 digits


def test_ready_points_rise_to_one_in_backward_order() -> None:
    table = load_workloads()["resnet50_in100_224"].layers
    assert table is not None
    points = table.ready_points()
    assert points[-1] == pytest.approx((1.0, 1.0))
    assert all(a[0] <= b[0] and a[1] <= b[1] for a, b in itertools.pairwise(points))
    # the fc layer (last in forward) is ready first, having cost ~nothing: ResNet-50's fc holds 0.9 % of compute
    assert points[0][0] < 0.01 and points[0][1] > 0.005


def test_a_malformed_row_names_the_file_and_row(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("name,kind,params,forward_flops,activation_bytes\nfc,linear,ten,1,1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="row 1"):
        read_table(bad)
