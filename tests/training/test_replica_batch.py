"""K replicas' forward/backward as one vmapped call: each replica's gradients, losses and BatchNorm statistics are
its own, as one-after-another computation gives them (to float32 rounding), and the models that cannot be batched
are named with the reason."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from distrepro.training.models import build_model
from distrepro.training.replica_batch import forward_backward_stacked, stack_key, unbatchable

pytestmark = pytest.mark.smoke

K = 4


def replicas(name: str, shape: tuple[int, int, int], **params: int) -> list[nn.Module]:
    """K replicas of one model, made to differ (as replicas do after local steps)."""
    torch.manual_seed(0)
    base = build_model(name, 5, shape, **params)
    out = []
    for i in range(K):
        m = copy.deepcopy(base)
        with torch.no_grad():
            for p in m.parameters():
                p.add_(0.01 * i * torch.randn_like(p))
        out.append(m)
    return out


def batches(shape: tuple[int, int, int], n: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    return [torch.randn(n, *shape, generator=g) for _ in range(K)], [
        torch.randint(0, 5, (n,), generator=g) for _ in range(K)
    ]


def part(model: nn.Module, name: str) -> Any:
    """A submodule by name, untyped (its buffers and parameters are read as tensors)."""
    return model.get_submodule(name)


def one_by_one(models: list[nn.Module], xs: list[torch.Tensor], ys: list[torch.Tensor]) -> list[float]:
    losses = []
    for m, x, y in zip(models, xs, ys, strict=True):
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        losses.append(float(loss.detach()))
    return losses


@pytest.mark.parametrize(
    ("name", "shape", "params"), [("small_cnn", (3, 8, 8), {"hidden": 8}), ("cnn1d", (1, 1, 16), {"width": 8})]
)
def test_each_replica_gets_its_own_gradients_and_loss(
    name: str, shape: tuple[int, int, int], params: dict[str, int]
) -> None:
    seq = replicas(name, shape, **params)
    bat = copy.deepcopy(seq)
    xs, ys = batches(shape, 6)
    expected = one_by_one(seq, xs, ys)
    got = forward_backward_stacked(bat, xs, ys)
    assert got == pytest.approx(expected, rel=1e-5)
    for a, b in zip(seq, bat, strict=True):
        for p, q in zip(a.parameters(), b.parameters(), strict=True):
            assert q.grad is not None and q.grad.shape == p.shape
            torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-6)
    # the replicas differ, so their gradients do: nothing was shared or averaged
    last = [list(m.parameters())[-1].grad for m in bat]
    assert last[0] is not None and last[1] is not None and not torch.allclose(last[0], last[1])


def test_batchnorm_buffers_are_stacked_and_updated_per_replica() -> None:
    seq = replicas("resnet18_cifar", (3, 8, 8), width=4)
    bat = copy.deepcopy(seq)
    xs, ys = batches((3, 8, 8), 5)
    one_by_one(seq, xs, ys)
    forward_backward_stacked(bat, xs, ys)
    for a, b in zip(seq, bat, strict=True):
        for (name, u), (_, v) in zip(a.named_buffers(), b.named_buffers(), strict=True):
            torch.testing.assert_close(v, u, rtol=1e-4, atol=1e-6, msg=name)
        assert int(part(b, "bn1").num_batches_tracked) == 1
    # every replica saw its own batch: its running mean is its own
    assert not torch.allclose(part(bat[0], "bn1").running_mean, part(bat[1], "bn1").running_mean)


def test_gradients_add_to_gradients_already_there_as_backward_does() -> None:
    seq = replicas("small_cnn", (3, 8, 8), hidden=8)
    bat = copy.deepcopy(seq)
    xs, ys = batches((3, 8, 8), 4)
    one_by_one(seq, xs, ys)
    one_by_one(bat, xs, ys)
    one_by_one(seq, xs, ys)  # a second micro-batch without zero_grad
    forward_backward_stacked(bat, xs, ys)
    for a, b in zip(seq, bat, strict=True):
        for p, q in zip(a.parameters(), b.parameters(), strict=True):
            torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-6)


def test_frozen_parameters_get_no_gradient() -> None:
    models = replicas("small_cnn", (3, 8, 8), hidden=8)
    for m in models:
        part(m, "conv1").weight.requires_grad_(False)
    xs, ys = batches((3, 8, 8), 4)
    forward_backward_stacked(models, xs, ys)
    assert all(part(m, "conv1").weight.grad is None and part(m, "conv2").weight.grad is not None for m in models)


def test_models_that_cannot_be_batched_say_why() -> None:
    model = build_model("small_cnn", 5, (3, 8, 8))
    assert unbatchable(model) is None
    assert "Dropout" in str(unbatchable(nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))))
    handle = part(model, "fc1").register_forward_hook(lambda *args: None)
    assert "hooks" in str(unbatchable(model))
    handle.remove()
    part(model, "fc2").weight.register_hook(lambda g: g)
    assert "gradient hooks" in str(unbatchable(model))
    bn = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4, momentum=None))
    assert "momentum None" in str(unbatchable(bn))


def test_stack_key_tells_replicas_from_other_models() -> None:
    a = build_model("small_cnn", 5, (3, 8, 8), hidden=8)
    b = copy.deepcopy(a)
    assert stack_key(a) == stack_key(b)
    b.eval()
    assert stack_key(a) != stack_key(b)
    assert stack_key(a) != stack_key(build_model("small_cnn", 5, (3, 8, 8), hidden=9))
    part(a, "conv1").weight.requires_grad_(False)
    assert stack_key(a) != stack_key(copy.deepcopy(b).train())
