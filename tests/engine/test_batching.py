"""``batched_replicas``: the in-process engine computes the forward/backward of the workers one event released as one
batched call. Each worker still sees its own gradients (K = 4, unequal batch sizes grouped by size), its own
BatchNorm statistics, and a batched run is the same bit for bit every time; off, nothing changes."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, ClassVar

import pytest
import torch
from torch import nn

from distrepro import api
from distrepro.config.run_config import validate_config
from distrepro.engine.inprocess.batching import ReplicaBatcher, check_mode
from distrepro.engine.inprocess.run import InProcessEngine
from distrepro.engine.loop import Harness
from distrepro.errors import ConfigError
from distrepro.job.resolve import Job, build_job
from distrepro.job.results import RunResult

pytestmark = pytest.mark.smoke

BASE: dict[str, Any] = {
    "method": "local_sgd",
    "method_params": {"period": 100},  # no averaging within the run: the replicas drift apart, each on its data
    "dataset": {"name": "synthetic", "params": {"train_size": 128, "test_size": 32, "image_size": 8, "num_classes": 4}},
    "model": {"name": "small_cnn", "params": {"hidden": 8}},
    "batch_size": [8, 8, 6, 6],
    "budget": {"steps": 3},
    "eval": {"times": 1},
    "torch_threads": 1,
}


class GradProbe(api.Method[api.MethodParams]):
    """Records every worker's gradients right after ``forward_backward``, then takes a plain SGD step."""

    name = "grad_probe"
    seen: ClassVar[dict[tuple[int, int], list[torch.Tensor]]] = {}

    def setup(self, ctx: api.WorkerContext) -> None:
        self.opt = torch.optim.SGD(ctx.model.parameters(), lr=0.1)

    def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None:
        ctx.forward_backward(batch)
        grads = [p.grad.clone() for p in ctx.model.parameters() if p.grad is not None]
        self.seen[(ctx.rank, int(ctx.train_state["step"]))] = grads
        self.opt.step()


def job(batched: bool | str, **overrides: Any) -> Job:
    cfg = validate_config({**copy.deepcopy(BASE), "batched_replicas": batched, **overrides})
    return build_job(cfg, 0)


def harness_run(j: Job) -> tuple[Harness, RunResult]:
    h = InProcessEngine().harness(j)
    result = h.run()
    assert result is not None
    return h, result


def state(result: RunResult) -> list[torch.Tensor]:
    return [torch.cat([t.detach().double().reshape(-1) for t in m.state_dict().values()]) for m in result.models]


def probe_run(batched: bool, **overrides: Any) -> tuple[Harness, RunResult]:
    """A run of :class:`GradProbe` (no communication: each replica keeps its own weights and statistics)."""
    base = job(batched, **overrides)
    plugin = dataclasses.replace(base.method, name="grad_probe", cls=GradProbe)
    GradProbe.seen = {}
    return harness_run(dataclasses.replace(base, method=plugin, params=api.MethodParams()))


def probe_grads(batched: bool) -> tuple[dict[tuple[int, int], list[torch.Tensor]], ReplicaBatcher | None]:
    h, _ = probe_run(batched)
    return GradProbe.seen, h.transport.batcher  # type: ignore[attr-defined]


def test_each_worker_sees_its_own_gradients_with_unequal_batch_sizes() -> None:
    sequential, none = probe_grads(False)
    batched, batcher = probe_grads(True)
    assert none is None and batcher is not None
    assert sequential.keys() == batched.keys() == {(r, s) for r in range(4) for s in range(3)}
    for key, grads in sequential.items():
        for g, h in zip(grads, batched[key], strict=True):
            torch.testing.assert_close(h, g, rtol=1e-4, atol=1e-6)
    # batches of 8 (ranks 0, 1) and of 6 (ranks 2, 3) form one group each: every call ran batched
    assert (batcher.batched_calls, batcher.solo_calls) == (12, 0)
    assert not torch.allclose(batched[(0, 2)][-1], batched[(1, 2)][-1])  # replicas apart, gradients their own


def test_a_batched_run_is_identical_run_to_run_and_close_to_the_sequential_one() -> None:
    _, first = harness_run(job(True))
    _, second = harness_run(job(True))
    _, sequential = harness_run(job(False))
    assert all(torch.equal(a, b) for a, b in zip(state(first), state(second), strict=True))
    assert first.final.metrics == second.final.metrics
    assert first.emulated_s == second.emulated_s == sequential.emulated_s  # time is charged alike
    for a, b in zip(state(first), state(sequential), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("method", ["ar_sgd", "gossip"])
def test_shipped_methods_train_alike_batched(method: str) -> None:
    """AR-SGD (lockstep, all-reduce launched from the gradient buckets) batches every call; gossip (asynchronous)
    only its first step, where one event starts every worker: the rest compute at once, as before."""
    h, batched = harness_run(job(True, method=method, method_params={}, batch_size=8))
    _, sequential = harness_run(job(False, method=method, method_params={}, batch_size=8))
    calls = sum(slot.worker.gradients for slot in h.slots)
    expected = calls if method == "ar_sgd" else 4
    assert h.transport.batcher.batched_calls == expected  # type: ignore[attr-defined]
    assert batched.emulated_s == sequential.emulated_s
    for a, b in zip(state(batched), state(sequential), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_batchnorm_buffers_stay_each_workers_own() -> None:
    resnet = {"model": {"name": "resnet18_cifar", "params": {"width": 4}}, "batch_size": 8, "budget": {"steps": 1}}
    h, batched = probe_run(True, **resnet)
    _, sequential = probe_run(False, **resnet)
    assert h.transport.batcher.batched_calls == 4  # type: ignore[attr-defined]
    means = [m.bn1.running_mean for m in batched.models]
    assert not torch.allclose(means[0], means[1])  # each worker's statistics come from its own batches
    assert all(int(m.bn1.num_batches_tracked) == 1 for m in batched.models)
    for a, b in zip(state(batched), state(sequential), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_auto_by_default_batches_a_model_that_can_be_and_false_does_not() -> None:
    default = InProcessEngine().harness(build_job(validate_config(copy.deepcopy(BASE)), 0))
    assert all(slot.worker.batcher is default.transport.batcher is not None for slot in default.slots)  # type: ignore[attr-defined]
    off = InProcessEngine().harness(job(False))
    assert off.transport.batcher is None  # type: ignore[attr-defined]
    assert all(slot.worker.batcher is None for slot in off.slots)


def test_true_refuses_a_model_that_cannot_be_batched_and_auto_leaves_it_alone() -> None:
    dropout = nn.Sequential(nn.Flatten(), nn.Linear(4, 2), nn.Dropout(0.5))
    with pytest.raises(ConfigError, match=r"batched_replicas.*Dropout"):
        check_mode(True, dropout)
    assert check_mode("auto", dropout) is False
    assert check_mode(False, nn.Linear(2, 2)) is False


def test_a_worker_whose_model_was_swapped_or_hooked_computes_alone() -> None:
    h = InProcessEngine().harness(job(True))
    batcher = h.transport.batcher  # type: ignore[attr-defined]
    worker = h.slots[0].worker
    h.transport.sched._runnable = [1]  # type: ignore[attr-defined]  # as in a wave where rank 1 is still to run
    assert batcher.eligible(worker)
    worker.model.register_forward_hook(lambda *args: None)
    x, y = torch.randn(2, 3, 8, 8), torch.tensor([0, 1])
    assert batcher.forward_backward(worker, x, y) > 0  # computed at once: it joined no wave (none is running)
    assert all(p.grad is not None for p in worker.model.parameters())
    worker.model = copy.deepcopy(worker.model)  # not the engine's replica any more
    assert not batcher.eligible(worker)
