"""The harness side of a worker (``distrepro.engine.harness_worker``): ``forward_backward`` without the backward
charges what the full call charges and returns the same loss, yet computes no gradient."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from distrepro.api.method import Batch
from distrepro.engine.clock import VirtualClock
from distrepro.engine.harness_worker import HarnessWorker


def _worker() -> HarnessWorker:
    torch.manual_seed(0)
    # dropout draws from the global generator and BatchNorm updates its statistics in the forward: both must happen
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.BatchNorm1d(8), torch.nn.Dropout(0.5))
    model.append(torch.nn.Linear(8, 3))

    def charge(rank: int, n: int, step: int, at_s: float) -> float:
        return 0.25 * n + 0.5 * step  # a modelled charge: depends on the call count, never on what ran

    return HarnessWorker(0, 1, model, comm=None, clock=VirtualClock(0), compute_charge=charge, seed_parts=("t",))  # type: ignore[arg-type]


def _batch() -> Batch:
    gen = torch.Generator().manual_seed(1)
    return Batch(torch.randn(5, 6, generator=gen), torch.randint(0, 3, (5,), generator=gen))


@pytest.mark.smoke
def test_without_the_backward_the_charge_loss_and_forward_state_are_the_full_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    backwards: list[int] = []
    original = torch.Tensor.backward

    def counting(self: torch.Tensor, *args: Any, **kwargs: Any) -> None:
        backwards.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "backward", counting)
    full, forward_only = _worker(), _worker()
    for step in range(3):
        torch.manual_seed(10 + step)  # the same dropout draws for both
        loss_full = full.forward_backward(_batch())
        torch.manual_seed(10 + step)
        loss_fwd = forward_only.forward_backward(_batch(), backward=False)
        assert loss_fwd == loss_full  # bit for bit
    assert len(backwards) == 3  # the full calls' only
    assert (forward_only.clock.t, forward_only.clock.compute_s) == (full.clock.t, full.clock.compute_s) == (5.25, 5.25)
    assert forward_only.gradients == full.gradients == 3 and forward_only.samples_computed == 15
    assert all(p.grad is None for p in forward_only.model.parameters())
    assert all(p.grad is not None for p in full.model.parameters())
    for a, b in zip(full.model.state_dict().values(), forward_only.model.state_dict().values(), strict=True):
        assert torch.equal(a, b)  # BatchNorm's running statistics moved alike (and no parameter moved)


@pytest.mark.smoke
def test_no_bucket_is_ready_without_a_backward() -> None:
    with pytest.raises(ValueError, match="no bucket is ever ready"):
        _worker().forward_backward(_batch(), on_bucket=lambda i, params: None, backward=False)
