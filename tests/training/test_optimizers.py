"""The optimizer factory: torch's optimizers by name, and AccumAdam(W) against Adam and the decent-dp package."""

from __future__ import annotations

import copy

import pytest
import torch

from distrepro.api.tensors import set_lr
from distrepro.training.optimizers import AccumAdam, OptimizerConfig, build_optimizer

pytestmark = [
    pytest.mark.smoke,
    pytest.mark.filterwarnings("ignore:Use _accelerator_graph_capture_health_check:DeprecationWarning"),
]


def _model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))


def _train(model: torch.nn.Module, opt: torch.optim.Optimizer, steps: int, seed: int = 1) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x, y = torch.randn(8, 6, generator=gen), torch.randint(0, 3, (8,), generator=gen)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def _close(a: list[torch.Tensor], b: list[torch.Tensor], tol: float) -> float:
    worst = max(float((x - y).abs().max()) for x, y in zip(a, b, strict=True))
    assert worst <= tol, worst
    return worst


@pytest.mark.parametrize(("decoupled", "reference"), [(False, torch.optim.Adam), (True, torch.optim.AdamW)])
def test_accum_adam_with_one_step_windows_is_adam(decoupled: bool, reference: type) -> None:
    ours, ref = _model(), _model()
    kw = {"lr": 3e-3, "betas": (0.9, 0.99), "eps": 1e-8, "weight_decay": 0.05}
    a = _train(ours, AccumAdam(ours.parameters(), accum_iter=1, decoupled=decoupled, **kw), 60)
    b = _train(ref, reference(ref.parameters(), **kw), 60)
    _close(a, b, 1e-6)


@pytest.mark.parametrize(("decoupled", "name"), [(False, "AccumAdam"), (True, "AccumAdamW")])
@pytest.mark.parametrize("accum_iter", [2, 4])
def test_accum_adam_matches_the_decent_dp_package(decoupled: bool, name: str, accum_iter: int) -> None:
    optim = pytest.importorskip("decent_dp.optim")
    ours, ref = _model(), _model()
    kw = {"lr": 2e-3, "betas": (0.9, 0.98), "eps": 1e-8, "weight_decay": 0.1, "accum_iter": accum_iter}
    a = _train(ours, AccumAdam(ours.parameters(), decoupled=decoupled, **kw), 23)
    b = _train(ref, getattr(optim, name)(ref.parameters(), **kw), 23)
    _close(a, b, 1e-6)


def test_accum_adam_with_windows_differs_from_adam() -> None:
    """The check above is not vacuous: accumulation changes the trajectory."""
    ours, ref = _model(), _model()
    a = _train(ours, AccumAdam(ours.parameters(), lr=3e-3, accum_iter=4), 20)
    b = _train(ref, torch.optim.Adam(ref.parameters(), lr=3e-3), 20)
    assert max(float((x - y).abs().max()) for x, y in zip(a, b, strict=True)) > 1e-4


@pytest.mark.parametrize(
    ("cfg", "cls", "group"),
    [
        (OptimizerConfig(name="sgd", lr=0.1, momentum=0.9, nesterov=True), torch.optim.SGD, {"nesterov": True}),
        (OptimizerConfig(name="sgd", lr=0.1, nesterov=True), torch.optim.SGD, {"nesterov": False}),
        (OptimizerConfig(name="adam", lr=1e-3, betas=(0.8, 0.9)), torch.optim.Adam, {"betas": (0.8, 0.9)}),
        (OptimizerConfig(name="adamw", lr=1e-3, weight_decay=0.1), torch.optim.AdamW, {"weight_decay": 0.1}),
        (OptimizerConfig(name="accum_adamw", lr=1e-3, accum_iter=8), AccumAdam, {"accum_iter": 8}),
    ],
)
def test_factory_builds_the_named_optimizer(cfg: OptimizerConfig, cls: type, group: dict) -> None:
    opt = build_optimizer(_model().parameters(), cfg)
    assert type(opt) is cls
    assert opt.param_groups[0]["lr"] == cfg.lr
    for key, value in group.items():
        assert opt.param_groups[0][key] == value


def test_sgd_momentum_step_hand_value() -> None:
    p = torch.nn.Parameter(torch.tensor([1.0]))
    opt = build_optimizer([p], OptimizerConfig(name="sgd", lr=0.5, momentum=0.9, weight_decay=0.1))
    for _ in range(2):
        p.grad = torch.tensor([2.0])
        opt.step()
    # step 1: g = 2 + 0.1*1 = 2.1, buf = 2.1, p = 1 - 1.05 = -0.05
    # step 2: g = 2 + 0.1*(-0.05) = 1.995, buf = 0.9*2.1 + 1.995 = 3.885, p = -0.05 - 1.9425 = -1.9925
    assert p.item() == pytest.approx(-1.9925)


def test_set_lr_reaches_every_group() -> None:
    m = _model()
    opt = build_optimizer([{"params": m[0].parameters()}, {"params": m[2].parameters()}], OptimizerConfig())
    set_lr(opt, 0.01)
    assert [g["lr"] for g in opt.param_groups] == [0.01, 0.01]


def test_accum_adam_state_round_trips_through_state_dict() -> None:
    a, b = _model(), _model()
    opt_a = AccumAdam(a.parameters(), lr=1e-3, accum_iter=3, decoupled=True, weight_decay=0.01)
    _train(a, opt_a, 5)
    b.load_state_dict(a.state_dict())
    opt_b = AccumAdam(b.parameters(), lr=1e-3, accum_iter=3, decoupled=True, weight_decay=0.01)
    opt_b.load_state_dict(copy.deepcopy(opt_a.state_dict()))  # as from a checkpoint file: no shared tensors
    _close(_train(a, opt_a, 7, seed=9), _train(b, opt_b, 7, seed=9), 0.0)
