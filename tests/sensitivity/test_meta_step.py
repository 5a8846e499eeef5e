"""A probe's repeated SGD steps on meta tensors are skipped only where they could change nothing, and its first
steps' momentum buffers made directly only where they are the real step's (distrepro/sensitivity/meta_step.py): the
optimizer state and every recorded event are those of the real steps."""

from __future__ import annotations

import copy

import pytest
import torch
from sensitivity_setups import PROBE_CASES, _config, probe_events, write_tiny_profile

from distrepro.config.run_config import validate_config
from distrepro.job.resolve import build_job
from distrepro.sensitivity import meta_step, probe
from distrepro.sensitivity.probe import Prober


def _meta_model() -> torch.nn.Module:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2))
    return copy.deepcopy(model).to("meta")


def _state(opt: torch.optim.Optimizer) -> list[tuple]:
    """Every state entry's key, shape, dtype, device, strides and autograd flags, in parameter order; and the order
    the state holds its parameters in."""
    out: list[tuple] = []
    for group in opt.param_groups:
        for p in group["params"]:
            for key, value in sorted(opt.state.get(p, {}).items()):
                meta = (tuple(value.shape), value.dtype, str(value.device), value.stride(), value.requires_grad)
                out.append((key, *meta, value.grad_fn is None, value.is_leaf))
    index = {id(p): i for group in opt.param_groups for i, p in enumerate(group["params"])}
    out.append(tuple(index[id(p)] for p in opt.state))
    return out


def _steps(opt: torch.optim.Optimizer, model: torch.nn.Module, steps: int, late: torch.nn.Parameter | None = None):
    for i in range(steps):
        for p in model.parameters():
            p.grad = None if (p is late and i == 0) else torch.zeros_like(p)
        opt.step()
    return _state(opt)


@pytest.mark.smoke
@pytest.mark.parametrize("kw", [{"momentum": 0.9, "weight_decay": 5e-4}, {"momentum": 0.9, "nesterov": True}, {}])
def test_repeat_steps_are_skipped_with_the_real_steps_state(kw: dict) -> None:
    real_model, fast_model = _meta_model(), _meta_model()
    real = torch.optim.SGD(real_model.parameters(), lr=0.1, **kw)
    fast = meta_step.steps_once_on_meta(torch.optim.SGD(fast_model.parameters(), lr=0.1, **kw))
    assert _steps(fast, fast_model, 4) == _steps(real, real_model, 4)
    # with momentum the first step makes the buffers (directly); without, no step has anything to do on meta
    assert fast.step.skipped == (3 if kw.get("momentum") else 4)
    assert fast.step.made == (1 if kw.get("momentum") else 0)
    if kw.get("momentum"):
        assert len(fast.state) == len(list(fast_model.parameters()))


@pytest.mark.smoke
def test_a_parameter_that_gains_a_gradient_later_gets_its_buffer_from_a_real_step() -> None:
    real_model, fast_model = _meta_model(), _meta_model()
    late_real, late_fast = next(iter(real_model.parameters())), next(iter(fast_model.parameters()))
    real = torch.optim.SGD(real_model.parameters(), lr=0.1, momentum=0.9)
    fast = meta_step.steps_once_on_meta(torch.optim.SGD(fast_model.parameters(), lr=0.1, momentum=0.9))
    assert _steps(fast, fast_model, 3, late_fast) == _steps(real, real_model, 3, late_real)
    assert fast.step.skipped == 1  # steps 1 and 2 make buffers (the late parameter's at 2), step 3 skipped
    assert fast.step.made == 2


@pytest.mark.smoke
@pytest.mark.parametrize(
    "kw",
    [
        {"momentum": 0.9, "foreach": True},
        {"momentum": 0.9, "lr": torch.tensor(0.1)},
    ],
)
def test_a_first_step_outside_the_plain_case_is_the_real_one(kw: dict) -> None:
    model = _meta_model()
    opt = meta_step.steps_once_on_meta(torch.optim.SGD(model.parameters(), **{"lr": 0.1, **kw}))
    real_calls: list[int] = []
    real = opt.step._real
    opt.step._real = lambda *a, **k: (real_calls.append(1), real(*a, **k))[1]
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    assert real_calls == [1] and opt.step.made == 0


@pytest.mark.smoke
def test_a_gradient_of_other_strides_gets_its_buffer_from_the_real_step() -> None:
    """A transposed (non-contiguous) gradient: weight decay's sum could take other strides, so the real step runs."""
    real_model, fast_model = _meta_model(), _meta_model()
    real = torch.optim.SGD(real_model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    fast = meta_step.steps_once_on_meta(
        torch.optim.SGD(fast_model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    )
    for model in (real_model, fast_model):
        for p in model.parameters():
            p.grad = torch.zeros(p.shape[::-1], device="meta").t() if p.dim() == 2 else torch.zeros_like(p)
    real.step()
    fast.step()
    assert _state(fast) == _state(real) and fast.step.made == 0


@pytest.mark.smoke
def test_hooks_other_optimizers_and_real_tensors_keep_the_real_step() -> None:
    model = _meta_model()
    opt = meta_step.steps_once_on_meta(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    calls: list[int] = []
    handle = opt.register_step_post_hook(lambda *_: calls.append(1))
    _steps(opt, model, 3)
    handle.remove()
    assert calls == [1, 1, 1] and opt.step.skipped == 0
    adam = torch.optim.Adam(model.parameters())
    assert not isinstance(meta_step.steps_once_on_meta(adam).step, meta_step._MetaSGDStep)
    cpu = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)
    assert not isinstance(meta_step.steps_once_on_meta(cpu).step, meta_step._MetaSGDStep)


@pytest.fixture(scope="module")
def tiny_profile(tmp_path_factory: pytest.TempPathFactory) -> str:
    return write_tiny_profile(tmp_path_factory.mktemp("meta_step"))


@pytest.mark.parametrize("method, params", PROBE_CASES)
def test_probe_events_are_those_of_the_real_steps(
    method: str, params: dict, tiny_profile: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = build_job(validate_config(_config(tiny_profile, method, params)), 0)
    sizes = [None, 1, 2, 5, 17, 33, 40]

    def events(prober: Prober) -> list:
        return probe_events(prober, job, sizes)

    wrapped: list[meta_step._MetaSGDStep] = []
    real_wrap = meta_step.steps_once_on_meta

    def counting(opt: torch.optim.Optimizer) -> torch.optim.Optimizer:
        out = real_wrap(opt)
        if isinstance(out.step, meta_step._MetaSGDStep):
            wrapped.append(out.step)
        return out

    monkeypatch.setattr(probe, "steps_once_on_meta", counting)
    fast = events(Prober(job, learn=False))
    monkeypatch.setattr(probe, "steps_once_on_meta", lambda opt: opt)
    assert fast == events(Prober(job, learn=False))  # the real step every time: the same events, to the byte
    assert wrapped, "the probe ran on meta tensors with a stock SGD"
    if method == "cadp":  # several micro-batches a round: repeats were skipped
        assert sum(s.skipped for s in wrapped) > 0
