"""Building a job counts its model's FLOPs and bytes once per process for each model, classes, input shape and
params: the figures are those of a fresh count, and any of the four that differs is counted anew."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from tiny_config import TINY
from torch import nn

from distrepro.config.run_config import validate_config
from distrepro.job import resolve
from distrepro.job.resolve import build_job


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, ...]]]:
    """The input shapes of the models counted from here on (none kept from before, none left after)."""
    shapes: list[tuple[int, ...]] = []
    count = resolve.train_flops_per_sample

    def spy(model: nn.Module, shape: tuple[int, ...]) -> float:
        shapes.append(tuple(shape))
        return count(model, shape)

    monkeypatch.setattr(resolve, "train_flops_per_sample", spy)
    resolve._count_model_once.cache_clear()
    yield shapes
    resolve._count_model_once.cache_clear()


@pytest.mark.smoke
def test_a_model_is_counted_once_for_its_shape_and_params(counted: list[tuple[int, ...]]) -> None:
    first = build_job(validate_config(TINY), 0)
    again = build_job(validate_config({**TINY, "method": "local_sgd"}), 1)  # another arm and seed, the same model
    assert counted == [(3, 8, 8)]
    wider = build_job(validate_config({**TINY, "model": {"name": "small_cnn", "params": {"hidden": 160}}}), 0)
    bigger = build_job(validate_config({**TINY, "dataset": {**TINY["dataset"], "params": {"image_size": 16}}}), 0)
    assert counted == [(3, 8, 8), (3, 8, 8), (3, 16, 16)]
    assert wider.proxy_param_bytes > first.proxy_param_bytes
    assert bigger.proxy_flops_per_sample > first.proxy_flops_per_sample
    fresh = resolve._count_model("small_cnn", 10, (3, 8, 8), {})
    assert (first.proxy_flops_per_sample, first.proxy_param_bytes) == fresh
    assert (again.proxy_flops_per_sample, again.proxy_param_bytes) == fresh


def test_a_model_the_config_names_wrongly_names_the_file_every_time(tmp_path: Any) -> None:
    path = tmp_path / "bad.yaml"
    cfg = validate_config({**TINY, "model": {"name": "small_cnn", "params": {"hidden": 0}}})
    for _ in range(2):  # an error is never kept: the second build says the same
        with pytest.raises(resolve.ConfigError, match=r"model\.params\.hidden") as info:
            build_job(cfg, 0, source=path)
        assert info.value.source == str(path)
