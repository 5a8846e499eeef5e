"""Decent-DP keeps each gradient bucket's parameters in one flat buffer: the exchange reads it and the mixing
writes it whole, and the module's parameters are views of it all along."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from distrepro import api
from distrepro.config.run_config import validate_config
from distrepro.conformance.checks import TWO_NODES
from distrepro.engine.inprocess.run import InProcessEngine
from distrepro.job.resolve import build_job
from distrepro.plugins.registry import get_method


def _aliased(method: Any) -> bool:
    """Every parameter of every bucket is the slice of its bucket's buffer at its place in the bucket."""
    for flat, params in zip(method.flats, method.buckets, strict=True):
        offsets = torch.tensor([0] + [p.numel() for p in params]).cumsum(0).tolist()
        if [p.data_ptr() for p in params] != [flat[o:].data_ptr() for o in offsets[:-1]] or offsets[-1] != len(flat):
            return False
    return True


def test_each_bucket_is_one_buffer_the_mixing_writes_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    cls = get_method("decentdp").cls
    original = cls.train_step
    seen: list[tuple[Any, api.WorkerContext, bool]] = []

    def train_step(self: Any, ctx: api.WorkerContext, batch: api.Batch) -> None:
        original(self, ctx, batch)
        seen.append((self, ctx, _aliased(self)))  # after this step's mixing and optimizer steps

    monkeypatch.setattr(cls, "train_step", train_step)
    cfg = validate_config(
        {
            "method": "decentdp",
            "method_params": {"topology": "ring", "optimizer": {"name": "adam", "lr": 1e-3}},
            "profile": TWO_NODES,
            "dataset": {"name": "synthetic", "params": {"train_size": 256, "test_size": 64, "image_size": 8}},
            "batch_size": 8,
            "budget": {"steps": 3},
            "eval": {"times": 1},
            "torch_threads": 1,
        }
    )
    InProcessEngine().run(build_job(cfg, 0))
    assert len(seen) == 12 and all(ok for _, _, ok in seen)  # 3 steps x 4 workers, aliased after every one
    method, ctx, _ = seen[-1]
    assert sum(len(f) for f in method.flats) == sum(p.numel() for p in ctx.model.parameters())
    # one mixing event, by hand: the ring's uniform weights give c_self = 0, so x becomes the sum received
    received = torch.randn(len(method.flats[0]), generator=torch.Generator().manual_seed(0))
    method.pending[0] = (None, received)
    buffer = method.flats[0]
    method._mix(ctx, 0, method.iteration + 1)
    assert method.flats[0] is buffer and torch.equal(buffer, received)
    assert torch.equal(torch.cat([p.detach().reshape(-1) for p in method.buckets[0]]), received)
