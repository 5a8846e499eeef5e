"""The plugin helpers of ``distrepro.api.tensors``: a model's parameters moved into one flat buffer."""

from __future__ import annotations

import pytest
import torch

from distrepro import api


@pytest.mark.smoke
def test_flat_parameters_alias_the_buffer_both_ways() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    params = list(model.parameters())
    before = [p.detach().clone() for p in params]
    params[0].grad = torch.ones_like(params[0])
    opt = torch.optim.SGD(params, lr=0.5)
    flat = api.flat_parameters(params)
    assert [p.data_ptr() for p in params] == [flat[o:].data_ptr() for o in (0, 12, 16, 24)] and flat.numel() == 26
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before, strict=True))  # values kept
    assert list(model.parameters()) == params and torch.equal(params[0].grad, torch.ones(4, 3))  # objects, grads kept
    flat[12:16] = 7.0  # a write to the buffer is the module's
    assert torch.equal(params[1], torch.full((4,), 7.0))  # model[0].bias
    opt.step()  # an optimizer holding the parameters moves the buffer
    assert torch.equal(flat[:12], (before[0] - 0.5).reshape(-1))


@pytest.mark.smoke
def test_flat_parameters_refuse_mixed_dtypes() -> None:
    params = [torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))]
    with pytest.raises(ValueError, match="one dtype and device"):
        api.flat_parameters(params)
    assert api.flat_parameters([]).numel() == 0
