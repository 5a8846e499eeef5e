"""The in-process engine end to end: determinism, method semantics, budgets, evaluation, allocation.

Runs are tiny (a 4-class synthetic task of 8 px images, a narrow small CNN, a few steps) and use
one torch thread (``torch_threads: 1``), so the whole file takes seconds.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from distrepro.api.method import Allocation, Batch
from distrepro.config.run_config import validate_config
from distrepro.data.loading import DatasetBundle
from distrepro.engine.evaluation import average_into, evaluate
from distrepro.engine.inprocess.run import InProcessEngine
from distrepro.engine.streams import WorkerStream, iterate_eval
from distrepro.job.resolve import Job, build_job
from distrepro.job.results import EvalRecord, RunResult
from distrepro.plugins.registry import get_method
from distrepro.seeding import generator
from distrepro.training.partition import iid_shards

pytestmark = pytest.mark.smoke

PLUGINS = Path(__file__).resolve().parents[1] / "_support" / "plugins"
METHODS = ["ar_sgd", "local_sgd", "gossip"]
TRAIN_SIZE = 256

BASE: dict[str, Any] = {
    "dataset": {
        "name": "synthetic",
        "params": {"train_size": TRAIN_SIZE, "test_size": 64, "image_size": 8, "num_classes": 4, "noise": 1.0},
    },
    "model": {"name": "small_cnn", "params": {"hidden": 32}},
    "batch_size": 8,
    "budget": {"steps": 6},
    "eval": {"times": 2},
    "torch_threads": 1,
}

_BUNDLES: dict[str, DatasetBundle] = {}


def config(method: str, **overrides: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    data["method"] = method
    data.update(overrides)
    return data


def job_for(method: str, seed: int = 0, **overrides: Any) -> Job:
    """A job for ``method``; the (deterministic) dataset is built once per process and shared."""
    cfg = validate_config(config(method, **overrides))
    job = build_job(cfg, seed, bundle=_BUNDLES.get("default"))
    _BUNDLES.setdefault("default", job.bundle)
    return job


def run(job: Job) -> RunResult:
    return InProcessEngine().run(job)


def flat(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([t.detach().reshape(-1) for t in model.state_dict().values()])


def same_models(a: list[torch.nn.Module], b: list[torch.nn.Module]) -> bool:
    return len(a) == len(b) and all(torch.equal(flat(x), flat(y)) for x, y in zip(a, b, strict=True))


def comparable(rec: EvalRecord) -> tuple[Any, ...]:
    """Everything of an evaluation except the wall time."""
    return (rec.step, rec.epoch, rec.samples, rec.emulated_s, rec.metrics, rec.workers, rec.method_records, rec.final)


# ---------------------------------------------------------------------- determinism


@pytest.mark.parametrize("method", METHODS)
def test_same_seed_is_bitwise_identical_and_other_seed_differs(method: str) -> None:
    first, second = run(job_for(method)), run(job_for(method))
    assert same_models(first.models, second.models)
    assert [comparable(e) for e in first.evals] == [comparable(e) for e in second.evals]
    assert first.timeline == second.timeline
    assert first.emulated_s == second.emulated_s
    assert all(math.isfinite(v) for v in first.final.metrics.values())

    other = run(job_for(method, seed=1))
    assert not same_models(first.models, other.models)
    assert other.final.metrics != first.final.metrics


# ---------------------------------------------------------------------- AR-SGD


def test_ar_sgd_replicas_stay_identical() -> None:
    result = run(job_for("ar_sgd"))
    assert all(torch.equal(flat(result.models[0]), flat(m)) for m in result.models[1:])
    assert not torch.equal(flat(result.models[0]), flat(job_for("ar_sgd").make_model()))  # it did train


def first_batches(job: Job, sizes: list[int]) -> list[Batch]:
    """The batches the engine draws in step 1, rebuilt from the public partition and stream API.

    Equal shares (AR-SGD's default allocation), partitioned with the run's ``partition`` stream of
    epoch 0, each rank's stream seeded with ``(*seed_parts, "rank", r, "data")``.
    """
    n = len(job.bundle.train)
    shards = iid_shards(n, [0.25] * 4, generator(*job.seed_parts, "partition", 0))
    return [
        WorkerStream(job.bundle, shards[r], b, (*job.seed_parts, "rank", r, "data")).next_batch()
        for r, b in enumerate(sizes)
    ]


def hand_sgd_step(job: Job, batches: list[Batch], lr: float, weighting: str) -> tuple[torch.nn.Module, float]:
    """One single-process SGD step from ``job.make_model()``; also the mean of the per-batch losses."""
    model = job.make_model()
    with torch.no_grad():
        losses = [float(F.cross_entropy(model(b.inputs), b.targets)) for b in batches]
    if weighting == "samples":  # the gradient of the mean loss over the concatenated batch
        inputs = torch.cat([b.inputs for b in batches])
        targets = torch.cat([b.targets for b in batches])
        F.cross_entropy(model(inputs), targets).backward()
    else:  # DDP's plain mean of the workers' gradients
        for b in batches:
            (F.cross_entropy(model(b.inputs), b.targets) / len(batches)).backward()
    with torch.no_grad():
        for p in model.parameters():
            assert p.grad is not None
            p.sub_(lr * p.grad)  # first step of momentum SGD: the buffer is the gradient itself
    return model, sum(losses) / len(losses)


@pytest.mark.parametrize("weighting", ["samples", "equal"])
def test_ar_sgd_step_equals_hand_computed_sgd_step(weighting: str) -> None:
    """Unequal batches [8, 16, 8, 16]: one AR-SGD step equals one SGD step computed by hand.

    With ``weighting: samples`` that is big-batch SGD on the concatenated 48 samples; with
    ``equal`` the plain mean of the four gradients. The two hand computations differ, so each
    comparison could fail.
    """
    sizes = [8, 16, 8, 16]
    lr = 0.1
    job = job_for(
        "ar_sgd",
        batch_size=sizes,
        budget={"steps": 1},
        eval={"times": 1},
        method_params={"lr": lr, "momentum": 0.9, "weighting": weighting},
    )
    result = run(job)
    batches = first_batches(job, sizes)
    assert [len(b) for b in batches] == sizes
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the engine ran (torch_threads: 1)
    try:
        expected, mean_loss = hand_sgd_step(job, batches, lr, weighting)
        other, _ = hand_sgd_step(job, batches, lr, "equal" if weighting == "samples" else "samples")
    finally:
        torch.set_num_threads(threads)

    # the engine trained on exactly these batches: its train loss is the mean of their initial losses
    assert result.final.metrics["train_loss"] == pytest.approx(mean_loss, rel=1e-6)
    assert [w.samples for w in result.final.workers] == sizes
    got = flat(result.models[0])
    assert torch.allclose(got, flat(expected), rtol=1e-5, atol=1e-7)
    assert not torch.allclose(flat(other), flat(expected), rtol=1e-5, atol=1e-7)
    assert not torch.allclose(got, flat(job.make_model()), rtol=1e-5, atol=1e-7)


# ---------------------------------------------------------------------- Local SGD


class _Snapshots:
    """Observer that copies every replica's parameters at each evaluation."""

    def __init__(self) -> None:
        self.models: list[torch.nn.Module] = []
        self.at: dict[int, list[torch.Tensor]] = {}

    def on_allocation(self, epoch: int, allocation: Allocation) -> None:
        pass

    def on_eval(self, record: EvalRecord) -> None:
        self.at[record.step] = [flat(m).clone() for m in self.models]

    def on_progress(self, fraction: float, emulated_s: float) -> None:
        pass


def test_local_sgd_replicas_differ_between_syncs_and_agree_right_after() -> None:
    job = job_for("local_sgd", method_params={"period": 3}, budget={"steps": 7}, eval={"every_steps": 1})
    snaps = _Snapshots()
    engine_run = InProcessEngine().harness(job, snaps)
    snaps.models = engine_run.models
    result = engine_run.run()
    assert result is not None
    assert sorted(snaps.at) == [1, 2, 3, 4, 5, 6, 7]  # steps 1-6 during training, 7 is the final eval

    def agree(step: int) -> bool:
        reps = snaps.at[step]
        return all(torch.equal(reps[0], r) for r in reps[1:])

    assert [step for step in range(1, 8) if agree(step)] == [3, 6, 7]  # syncs at 3, 6; finalize at 7
    assert result.evals[-1].final
    # every rank recorded H = 3: the mean, and each rank's own value
    assert result.final.method_records == {"sync_period": 3.0} | {f"sync_period/rank{r}": 3.0 for r in range(4)}


# ---------------------------------------------------------------------- gossip


def exchanges_per_step(result: RunResult, job: Job) -> list[float]:
    """Pairwise averagings per gradient step of each worker (each one sends one parameter vector)."""
    vector_bytes = sum(p.numel() * p.element_size() for p in job.make_model().parameters())
    return [w.bytes_sent / vector_bytes / w.gradients for w in result.final.workers]


@pytest.mark.parametrize(
    ("rate", "poisson", "low", "high"), [(0.0, True, 0.0, 0.0), (1.0, False, 0.8, 1.0), (2.0, True, 1.4, 2.6)]
)
def test_gossip_averages_about_rate_times_per_step(rate: float, poisson: bool, low: float, high: float) -> None:
    job = job_for("gossip", method_params={"rate": rate, "poisson": poisson}, budget={"steps": 10})
    result = run(job)
    per_step = exchanges_per_step(result, job)
    assert all(low <= x <= high for x in per_step), per_step
    total = sum(w.bytes_sent for w in result.final.workers)
    vector_bytes = sum(p.numel() * 4 for p in job.make_model().parameters())
    assert total % (2 * vector_bytes) == 0  # every exchange is counted once on each side
    if rate == 0:
        assert not any(torch.equal(flat(result.models[0]), flat(m)) for m in result.models[1:])


# ---------------------------------------------------------------------- budgets and evaluation


def test_steps_budget_and_evenly_spaced_evaluations() -> None:
    result = run(job_for("ar_sgd", budget={"steps": 6}, eval={"times": 3}))
    assert [(e.step, e.final) for e in result.evals] == [(2, False), (4, False), (6, True)]
    assert [e.samples for e in result.evals] == [64, 128, 192]
    assert all(w.gradients == 6 and w.samples == 48 for w in result.final.workers)
    assert result.final is result.evals[-1]


def test_epochs_budget() -> None:
    # 4 workers x 8 samples = 32 per step; 256 samples per epoch: 0.5 epoch = 4 steps
    result = run(job_for("ar_sgd", budget={"epochs": 0.5}, eval={"times": 2}))
    assert result.final.step == 4
    assert result.final.epoch == pytest.approx(0.5)
    assert [e.step for e in result.evals] == [2, 4]
    assert [e.epoch for e in result.evals] == pytest.approx([0.25, 0.5])


def test_samples_budget_stops_at_the_first_step_reaching_it() -> None:
    result = run(job_for("ar_sgd", budget={"samples": 100}, eval={"times": 2}))
    assert result.final.samples == 128  # 96 < 100 after step 3; 128 after step 4
    assert result.final.step == 4
    assert [e.samples for e in result.evals] == [64, 128]  # eval every round(100/2) = 50 samples


def test_emulated_seconds_budget_and_eval_period() -> None:
    reference = run(job_for("ar_sgd", budget={"steps": 4}, eval={"times": 4}))
    step_s = reference.evals[0].emulated_s  # homogeneous profile, no noise: every step costs the same
    assert [e.emulated_s for e in reference.evals] == pytest.approx([step_s * k for k in (1, 2, 3, 4)], rel=1e-9)

    result = run(
        job_for("ar_sgd", budget={"emulated_seconds": 2.5 * step_s}, eval={"every_emulated_seconds": 1.5 * step_s})
    )
    assert result.final.step == 3
    assert result.final.emulated_s >= 2.5 * step_s > result.final.emulated_s - step_s
    # the eval point 1.5 steps is crossed in step 2; the final evaluation follows step 3
    assert [e.step for e in result.evals] == [2, 3]


def test_gossip_budget_counts_gradients_of_all_workers() -> None:
    result = run(job_for("gossip", budget={"steps": 5}, eval={"times": 5}))
    grads = [w.gradients for w in result.final.workers]
    assert 20 <= sum(grads) <= 20 + 3  # at most the other workers' in-flight steps past the budget
    assert result.final.step == 5
    assert [e.step for e in result.evals] == [1, 2, 3, 4, 5]
    times = [e.emulated_s for e in result.evals]
    assert times == sorted(times)


def test_time_to_target_is_the_first_evaluation_that_reaches_it() -> None:
    overrides: dict[str, Any] = {"budget": {"steps": 8}, "eval": {"times": 4}}
    plain = run(job_for("ar_sgd", **overrides))
    assert plain.time_to_target_s is None and plain.step_to_target is None
    accs = [e.metrics["val_accuracy"] for e in plain.evals]
    goal = max(accs)
    first = next(e for e in plain.evals if e.metrics["val_accuracy"] >= goal)

    hit = run(job_for("ar_sgd", target={"metric": "val_accuracy", "value": goal}, **overrides))
    assert hit.time_to_target_s == first.emulated_s
    assert hit.step_to_target == first.step

    missed = run(job_for("ar_sgd", target={"metric": "val_accuracy", "value": 1.01}, **overrides))
    assert missed.time_to_target_s is None and missed.step_to_target is None

    loss_goal = plain.evals[1].metrics["val_loss"]
    first_low = next(e for e in plain.evals if e.metrics["val_loss"] <= loss_goal)
    low = run(job_for("ar_sgd", target={"metric": "val_loss", "value": loss_goal, "direction": "min"}, **overrides))
    assert low.time_to_target_s == first_low.emulated_s


# ---------------------------------------------------------------------- allocation and idle time


def test_method_allocation_is_applied_and_reapplied_at_epoch_boundaries() -> None:
    plugin = get_method("unequal_alloc", root=PLUGINS)
    module_first, module_later = plugin.cls.allocate.__globals__["FIRST"], plugin.cls.allocate.__globals__["LATER"]
    plugin.cls.seen.clear()
    base = job_for("ar_sgd", budget={"steps": 16}, eval={"times": 1})
    job = dataclasses.replace(base, method=plugin, params=plugin.cls.Params())
    engine_run = InProcessEngine().harness(job)
    result = engine_run.run()
    assert result is not None

    assert result.allocations == [(0, module_first), (1, module_later)]
    # epoch 0: 12 + 6 + 3 + 0 = 21 samples per step, so the boundary (256) is crossed by step 13
    expected = [13 * b0 + 3 * b1 for b0, b1 in zip((12, 6, 3, 0), (2, 4, 6, 8), strict=True)]
    assert [w.samples for w in result.final.workers] == expected == [162, 90, 57, 24]
    assert result.final.samples == sum(expected)
    assert [w.gradients for w in result.final.workers] == [16] * 4
    later = [int(s.stream.indices.numel()) for s in engine_run.slots]  # type: ignore[union-attr]
    assert later == [64] * 4  # the later, equal shares

    seen = plugin.cls.seen
    # epoch 0 twice: the job's LR plan binds to the epoch-0 allocation (its global batch), then the run starts
    assert [c.epoch for c in seen] == [0, 0, 1]
    assert seen[0].measured_samples_per_s is None and seen[1].measured_samples_per_s is None
    declared = [d.declared_samples_per_s for d in seen[2].devices]
    measured = seen[2].measured_samples_per_s
    assert measured is not None
    assert list(measured[:3]) == pytest.approx(declared[:3], rel=1e-9)  # no noise in this profile
    assert math.isnan(measured[3])  # rank 3 had no data in epoch 0


def test_first_allocation_gives_each_worker_its_share() -> None:
    plugin = get_method("unequal_alloc", root=PLUGINS)
    job = dataclasses.replace(job_for("ar_sgd", budget={"steps": 2}), method=plugin, params=plugin.cls.Params())
    engine_run = InProcessEngine().harness(job)
    result = engine_run.run()
    assert result is not None
    sizes = [int(getattr(s.stream, "indices", torch.empty(0)).numel()) for s in engine_run.slots]
    assert sizes == [128, 64, 64, 0]
    assert [w.samples for w in result.final.workers] == [24, 12, 6, 0]


def test_ar_sgd_on_hetero_profile_idles_fast_workers_only() -> None:
    result = run(job_for("ar_sgd", profile="hetero-2fast-2slow", budget={"steps": 3}))
    w = result.final.workers
    assert w[0].idle_s > 0 and w[1].idle_s > 0
    assert w[2].idle_s == 0.0 and w[3].idle_s == 0.0
    # the slow GPUs take twice as long, so a fast one waits exactly its own compute time each step
    assert w[2].compute_s == pytest.approx(2 * w[0].compute_s, rel=1e-9)
    assert w[0].idle_s == pytest.approx(w[0].compute_s, rel=1e-9)
    assert len({round(x.clock_s, 12) for x in w}) == 1  # lockstep: everyone ends together
    idle_spans = {s.rank for s in result.timeline if s.kind == "idle"}
    assert idle_spans == {0, 1}


def test_ar_sgd_on_homogeneous_profile_never_idles() -> None:
    result = run(job_for("ar_sgd", budget={"steps": 3}))
    assert all(w.idle_s == 0.0 for w in result.final.workers)
    assert all(w.comm_s > 0 for w in result.final.workers)


# ---------------------------------------------------------------------- what a method sees


def probe_job(**overrides: Any) -> tuple[Job, Any]:
    plugin = get_method("probe_state", root=PLUGINS)
    plugin.cls.seen.clear()
    job = dataclasses.replace(job_for("ar_sgd", **overrides), method=plugin, params=plugin.cls.Params())
    return job, plugin.cls


def test_train_state_shows_local_step_and_global_progress() -> None:
    job, cls = probe_job(batch_size=[8, 4, 8, 4], budget={"steps": 3})
    run(job)
    per_step = 24  # samples of one lockstep iteration over all workers
    assert len(cls.seen) == 12
    for rank, state in cls.seen:
        k = state["step"]
        assert sum(1 for r, s in cls.seen if r == rank and s["step"] == k) == 1
        assert state["samples"] == k * per_step
        assert state["epoch"] == pytest.approx(k * per_step / TRAIN_SIZE)
    assert sorted(s["step"] for _, s in cls.seen) == [0] * 4 + [1] * 4 + [2] * 4


def test_train_state_shows_the_budget() -> None:
    job, cls = probe_job(budget={"steps": 2})
    run(job)
    assert cls.seen and all(state["budget"] is not None for _, state in cls.seen)


def test_train_state_is_read_only_for_methods() -> None:
    job, _ = probe_job(budget={"steps": 1})
    engine_run = InProcessEngine().harness(job)
    with pytest.raises(TypeError):
        engine_run.slots[0].worker.train_state["step"] = 5  # type: ignore[index]


@pytest.mark.parametrize("eval_on", ["average", "rank0"])
def test_evaluation_uses_the_average_or_rank0_model(eval_on: str) -> None:
    job, cls = probe_job(budget={"steps": 2}, eval={"times": 1})
    variant = type("Probe", (cls,), {"evaluated_on": classmethod(lambda c, params: eval_on)})
    job = dataclasses.replace(job, method=dataclasses.replace(job.method, cls=variant))
    result = run(job)
    models = result.models
    assert not torch.equal(flat(models[0]), flat(models[1]))  # no communication: replicas drifted

    probe = job.make_model()
    if eval_on == "average":
        average_into(probe, models)
    else:
        probe.load_state_dict(models[0].state_dict())
    expected = evaluate(probe, iterate_eval(job.bundle, job.config.eval.batch_size))
    assert result.final.metrics["val_loss"] == pytest.approx(expected["val_loss"], rel=1e-6)
    assert result.final.metrics["val_accuracy"] == expected["val_accuracy"]
    other = job.make_model()  # the model the other choice would evaluate scores differently
    if eval_on == "average":
        other.load_state_dict(models[0].state_dict())
    else:
        average_into(other, models)
    assert evaluate(other, iterate_eval(job.bundle, 512))["val_loss"] != pytest.approx(expected["val_loss"], rel=1e-6)


def test_val_loss_target_defaults_to_lower_is_better() -> None:
    result = run(job_for("ar_sgd", budget={"steps": 2}, target={"metric": "val_loss", "value": 0.01}))
    assert all(e.metrics["val_loss"] > 0.01 for e in result.evals)  # never reached ...
    assert result.time_to_target_s is None  # ... so no time-to-target
