"""The probe's zero gradients on meta (distrepro/sensitivity/probe.py ``_zeros_like``): each a fresh tensor with
exactly ``torch.zeros_like``'s shape, dtype, strides and flags, and the same recorded events as with it."""

from __future__ import annotations

import pytest
import torch
from sensitivity_setups import PROBE_CASES, _config, probe_events, write_tiny_profile

from distrepro.config.run_config import validate_config
from distrepro.job.resolve import build_job
from distrepro.sensitivity import probe
from distrepro.sensitivity.probe import Prober


def _layout(t: torch.Tensor) -> tuple:
    return (tuple(t.shape), t.dtype, str(t.device), t.stride(), t.requires_grad, t.grad_fn is None, t.is_leaf)


@pytest.mark.smoke
def test_meta_zero_gradients_are_fresh_tensors_as_zeros_like_makes_them() -> None:
    base = torch.nn.Parameter(torch.empty(3, 5, device="meta"))
    channels_last = torch.nn.Parameter(torch.empty(2, 3, 4, 4, device="meta").to(memory_format=torch.channels_last))
    cache: probe.ZeroCache = {}
    for p in (base, channels_last):
        first, second = probe._zeros_like(p, cache), probe._zeros_like(p, cache)
        assert first is not second  # what a method does to one gradient cannot reach the next
        assert _layout(first) == _layout(second) == _layout(torch.zeros_like(p))
    with torch.no_grad():
        base.data = torch.empty(4, 2, device="meta")  # the parameter changed shape: a new zero gradient
    assert tuple(probe._zeros_like(base, cache).shape) == (4, 2)
    real = torch.nn.Parameter(torch.ones(2))
    assert probe._zeros_like(real, cache).tolist() == [0.0, 0.0] and id(real) not in cache  # real: always new


@pytest.fixture(scope="module")
def tiny_profile(tmp_path_factory: pytest.TempPathFactory) -> str:
    return write_tiny_profile(tmp_path_factory.mktemp("probe"))


@pytest.mark.parametrize("method, params", PROBE_CASES)
def test_probe_events_with_cached_zeros_are_those_of_zeros_like(
    method: str, params: dict, tiny_profile: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = build_job(validate_config(_config(tiny_profile, method, params)), 0)
    sizes = [None, 1, 2, 5, 17, 33]

    def events(prober: Prober) -> list:
        return probe_events(prober, job, sizes)

    cached_prober = Prober(job, learn=False)
    cached = events(cached_prober)
    assert cached_prober._meta is not None and cached_prober._zeros, "the probe ran on meta with the cache"
    monkeypatch.setattr(probe, "_zeros_like", lambda p, cache: torch.zeros_like(p))
    assert cached == events(Prober(job, learn=False))
