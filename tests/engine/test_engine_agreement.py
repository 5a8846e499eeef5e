"""Both engines run one harness loop: every method gives the same run in-process and under torch.distributed.

Synchronous methods agree to float tolerance on parameters, clocks, bytes, evaluations, records
and allocations (clocks: because no two flows share a link at once here; where they do, the distributed
engine charges each as if alone, a lower bound, see ``distrepro/engine/multiprocess/comm.py``).
Asynchronous ones interleave by real time under torch.distributed, so they agree on the contract:
the model evaluated (``evaluated_on``), the recorded keys, the bytes of each exchange, every rank in every
evaluation. Two ranks (``pair-2``: the second at half speed), a few steps,
tiny synthetic data; each distributed run meets through a rendezvous file in a temporary folder.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from distrepro.config.run_config import RunConfig, validate_config
from distrepro.engine.evaluation import average_into, evaluate
from distrepro.engine.inprocess.run import InProcessEngine
from distrepro.engine.multiprocess.launch import DistEngine
from distrepro.engine.rank_reports import aggregate_records
from distrepro.engine.streams import iterate_eval
from distrepro.hardware.cluster_layout import cluster_layout
from distrepro.hardware.profiles import load_profile
from distrepro.job.resolve import build_job
from distrepro.job.results import EvalRecord, RunResult
from distrepro.plugins.registry import get_method, methods

pytestmark = pytest.mark.distributed

#: per method: what its run needs beyond the common config and its ``smoke_params`` (more steps; an epoch
#: boundary where the method re-allocates from measured speeds). The list of methods is not here: it is every
#: discovered synchronous method (:func:`synchronous_methods`), so a new plugin is compared without being listed.
EXTRA: dict[str, dict[str, Any]] = {
    "local_sgd": {"budget": {"steps": 5}},
    "decentdp": {"method_params": {"topology": "ring"}},  # pair-2 has one rank per node: no alternating ring
    "deepspeed_zero": {"method_params": {"weight_decay": 1e-3}},
    "chao_alloc": {"method_params": {"mode": "adaptive"}, "budget": {"epochs": 1.3}, "eval": {"times": 2}},
    "cadp": {
        "method_params": {"micro_batch": 4, "round_epochs": 0.2, "warmup_steps": 2, "co_adaptive": True},
        "budget": {"epochs": 1.3},
        "eval": {"times": 2},
    },
}
#: test plugins compared too (``tests/_support/plugins``)
TEST_PLUGINS = ("nonblocking_probe",)


def synchronous_methods() -> list[str]:
    """Every discovered synchronous method, and the test plugins; ``test_opt_outs["engine_agreement"]`` leaves
    one out with its reason (a skip, not a silent omission)."""
    return sorted(name for name, plugin in methods().items() if plugin.cls.synchronous) + list(TEST_PLUGINS)


def _method_cfg(method: str) -> RunConfig:
    """The compared run of ``method``: its ``smoke_params``, then its :data:`EXTRA`; skips what cannot run."""
    cls = get_method(method).cls
    reason = cls.test_opt_outs.get("engine_agreement")
    if reason:
        pytest.skip(f"{method}: {reason}")
    extra = dict(EXTRA.get(method, {}))
    smoke = {} if cls.smoke_params is None else cls.smoke_params.model_dump(exclude_unset=True)
    params = smoke | extra.pop("method_params", {})
    cfg = _cfg(method, method_params=params, **extra)
    missing = [mod for mod in cls.requires if importlib.util.find_spec(mod) is None]
    why = cls(cls.Params(**params)).skip(cluster_layout(load_profile(cfg.profile)))
    if missing or why:
        pytest.skip(f"{method}: {why or f'needs {missing}'}")
    return cfg


def _cfg(method: str, **over: Any) -> RunConfig:
    base: dict[str, Any] = {
        "method": method,
        "profile": "pair-2",
        "dataset": {"params": {"train_size": 256, "test_size": 128, "image_size": 8}},
        "batch_size": [8, 16],
        "budget": {"steps": 4},
        "eval": {"every_steps": 2},
        "dist": {"timeout_s": 30},
    }
    return validate_config(base | over)


def _both(cfg: RunConfig) -> tuple[RunResult, RunResult]:
    a = InProcessEngine().run(build_job(cfg, 0))
    b = DistEngine().run_cell(build_job(cfg.model_copy(update={"engine": "dist"}), 0), None)
    return a, b


def _flat(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([t.detach().reshape(-1).double() for t in model.state_dict().values()])


def _same_evaluation(a: EvalRecord, b: EvalRecord) -> None:
    assert (b.step, b.samples, b.final) == (a.step, a.samples, a.final)
    assert b.epoch == pytest.approx(a.epoch, rel=1e-12)
    assert b.emulated_s == pytest.approx(a.emulated_s, rel=1e-9)
    for key in ("val_loss", "val_accuracy", "train_loss"):
        assert b.metrics[key] == pytest.approx(a.metrics[key], rel=1e-5, abs=1e-7), key
    assert b.metrics["consensus_distance"] == pytest.approx(a.metrics["consensus_distance"], rel=1e-6, abs=1e-12)
    assert [w.rank for w in b.workers] == [w.rank for w in a.workers]
    for wa, wb in zip(a.workers, b.workers, strict=True):
        for key in ("clock_s", "compute_s", "comm_s", "idle_s"):
            assert getattr(wb, key) == pytest.approx(getattr(wa, key), rel=1e-9, abs=1e-12), (wa.rank, key)
        assert (wb.bytes_sent, wb.samples, wb.gradients) == (wa.bytes_sent, wa.samples, wa.gradients)
    assert b.method_records == pytest.approx(a.method_records, rel=1e-9)  # same keys, same values


#: generated cases that fail today, found by this test: strict xfails, so a fix is noticed
KNOWN_BROKEN: dict[str, str] = {}


@pytest.mark.parametrize(
    "method",
    [
        pytest.param(m, marks=pytest.mark.xfail(reason=KNOWN_BROKEN[m], strict=True)) if m in KNOWN_BROKEN else m
        for m in synchronous_methods()
    ],
)
def test_synchronous_methods_give_the_same_run_on_both_engines(
    profiles: Path, with_test_plugins: Callable[..., Path], method: str
) -> None:
    with_test_plugins(*TEST_PLUGINS)
    a, b = _both(_method_cfg(method))
    assert torch.allclose(_flat(a.models[0]), _flat(b.models[0]), atol=1e-6)
    assert b.allocations == a.allocations
    assert len(b.evals) == len(a.evals) >= 2
    for ea, eb in zip(a.evals, b.evals, strict=True):
        _same_evaluation(ea, eb)
    if method == "ar_sgd":  # the slow worker (rank 1) never waits; the fast one does
        assert b.final.workers[0].idle_s > 0 and b.final.workers[1].idle_s == pytest.approx(0.0, abs=1e-12)
    if method == "local_sgd":  # period 3, evaluations at steps 2, 4 (mid-round) and the final one (averaged)
        assert [e.metrics["consensus_distance"] > 0 for e in b.evals] == [True, True, False]
    if method == "ar_sgd":
        assert all(e.metrics["consensus_distance"] == pytest.approx(0.0, abs=1e-12) for e in b.evals)
    if method == "cadp":  # records: the mean over ranks and each rank's own (fast rank 0 takes more steps)
        rec = b.final.method_records
        assert rec["local_steps"] == (rec["local_steps/rank0"] + rec["local_steps/rank1"]) / 2
        assert rec["local_steps/rank0"] > rec["local_steps/rank1"]
    if method == "nonblocking_probe":  # torch.distributed's answers (inputs at issue, results at wait) on both
        expected = get_method("nonblocking_probe").cls.train_step.__globals__["expected"]
        assert a.final.method_records == aggregate_records({r: expected(r, 2) for r in range(2)})


def test_gossip_keeps_the_contract_on_both_engines(profiles: Path) -> None:
    cfg = _cfg("gossip", method_params={"rate": 1.0, "poisson": False}, eval={"every_steps": 1})
    vector = sum(p.numel() * p.element_size() for p in build_job(cfg, 0).make_model().parameters())
    for run in _both(cfg):
        assert [e.step for e in run.evals] == [1, 2, 3, 4]
        assert all([w.rank for w in e.workers] == [0, 1] for e in run.evals)
        sent = [w.bytes_sent for w in run.final.workers]
        assert all(s > 0 and s % vector == 0 for s in sent)  # one parameter vector per exchange and side
        assert sent[0] == sent[1]  # two ranks on a ring: every exchange is between them
        assert set(run.final.method_records) == {f"averagings_per_step{s}" for s in ("", "/rank0", "/rank1")}


@pytest.mark.parametrize("every", [{"every_steps": 1}, {"every_epochs": 0.02}], ids=["steps", "several-per-step"])
def test_asynchronous_evaluations_score_the_average_on_both_engines(
    profiles: Path, with_test_plugins: Callable[..., Path], every: dict[str, float]
) -> None:
    """Every evaluation of an ``eval_on = "average"`` method, in flight or final, scores the average of
    all replicas, not rank 0's (the replicas of ``fixed_replicas`` differ and never change). With an
    evaluation point every 5 samples, a step crosses several at once and ranks stop at different points."""
    with_test_plugins("fixed_replicas")
    cfg = _cfg("fixed_replicas", eval=every)
    job = build_job(cfg, 0)
    replicas = [job.make_model(), job.make_model()]
    with torch.no_grad():
        for q in replicas[1].parameters():
            q.add_(job.params.shift)  # type: ignore[attr-defined]
    average = job.make_model()
    average_into(average, replicas)
    batches = list(iterate_eval(job.bundle, cfg.eval.batch_size))
    expected, rank0 = evaluate(average, batches)["val_loss"], evaluate(replicas[0], batches)["val_loss"]
    assert expected != pytest.approx(rank0, rel=1e-3)
    for run in _both(cfg):
        if "every_steps" in every:
            assert [e.step for e in run.evals] == [1, 2, 3, 4]
        else:
            samples = [e.samples for e in run.evals]
            assert len(samples) >= 4 and samples == sorted(set(samples))
        assert [e.metrics["val_loss"] for e in run.evals] == pytest.approx([expected] * len(run.evals), rel=1e-6)
        assert all(len(e.workers) == 2 for e in run.evals)
        assert run.final.method_records == {"rank": 0.5, "rank/rank0": 0.0, "rank/rank1": 1.0}
        # two replicas a shift apart on every parameter: (1/2)·2·P·(shift/2)² = P·shift²/4, in flight
        # (one non-blocking reduce of ‖x_i − x_0‖² beside the state) and at the end (blocking) alike
        distance = sum(p.numel() for p in average.parameters()) * job.params.shift**2 / 4  # type: ignore[attr-defined]
        assert [e.metrics["consensus_distance"] for e in run.evals] == pytest.approx([distance] * len(run.evals))
