"""A²CiD² (``methods/acid``): constants on graphs small enough to derive by hand, the exact mixing flow, the
exchange update, the plan, the complete-graph refusal, bitwise determinism and gossip reaching consensus; gossip-only
arms computing no gradient, and the replica kept in one flat buffer."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from pydantic import ValidationError

from distrepro.config.run_config import validate_config
from distrepro.engine.harness_worker import HarnessWorker
from distrepro.engine.inprocess import InProcessEngine
from distrepro.job.resolve import build_job
from distrepro.orchestration.campaign import summary_metrics
from distrepro.orchestration.plan import build_plan
from distrepro.plugins.registry import get_method, plugin_module
from distrepro.plugins.roots import repo_root

graph = plugin_module("acid", "graph")
dynamics = plugin_module("acid", "dynamics")


# --------------------------------------------------------------------------- graph constants
@pytest.mark.parametrize("rate", [1.0, 2.0])
def test_two_workers_are_one_edge(rate: float) -> None:
    """Λ = r [[1, −1], [−1, 1]]: λ⁺ = 2r, and the edge's ½·resistance is 1/(2r) too, so α̃ = ½, η = r."""
    c = graph.constants("ring", 2, rate)
    assert (c.chi1, c.chi2) == pytest.approx((1 / (2 * rate), 1 / (2 * rate)))
    assert (c.alpha_tilde, c.eta) == pytest.approx((0.5, rate))


@pytest.mark.smoke
def test_ring_of_four_by_hand() -> None:
    """Λ = L(C4)/2, eigenvalues 0, 1, 1, 2: χ₁ = 1; adjacent resistance in C4 with conductance ½ is 3/2: χ₂ = 3/4."""
    c = graph.constants("ring", 4, 1.0)
    assert (c.chi1, c.chi2) == pytest.approx((1.0, 0.75))
    assert (c.alpha_tilde, c.eta) == pytest.approx((1 / math.sqrt(3), 1 / math.sqrt(3)))


def test_exponential_of_four_by_hand() -> None:
    """Lists [i±1, i+2, i+2]: W = ¼ to each side, ½ to the antipode; Λ's eigenvalues 0, 3/2, 1, 3/2 (χ₁ = 1/r);
    Fourier sums give resistance (2/1.5 + 4 + 2/1.5)/4 = 5/3 for a side edge, 4/3 for the antipode: χ₂ = 5/(6r)."""
    assert graph.neighbours("exponential", 0, 4) == [3, 2, 1, 2]
    for rate in (1.0, 2.0):
        c = graph.constants("exponential", 4, rate)
        assert (c.chi1, c.chi2) == pytest.approx((1 / rate, 5 / (6 * rate)))
        assert c.alpha_tilde == pytest.approx(0.5 * math.sqrt(6 / 5))
        assert c.eta == pytest.approx(rate / (2 * math.sqrt(5 / 6)))


@pytest.mark.parametrize("n", [8, 16, 64])
@pytest.mark.parametrize("rate", [1.0, 2.0])
def test_ring_closed_form(n: int, rate: float) -> None:
    """Λ = (r/2) L(ring): λ₂ = r(1 − cos 2π/n); adjacent resistance (n−1)/n at unit conductance: χ₂ = (n−1)/(rn).
    η grows linearly with the rate, α̃ does not depend on it."""
    c = graph.constants("ring", n, rate)
    assert c.chi1 == pytest.approx(1 / (rate * (1 - math.cos(2 * math.pi / n))))
    assert c.chi2 == pytest.approx((n - 1) / (rate * n))
    one = graph.constants("ring", n, 1.0)
    assert c.eta == pytest.approx(rate * one.eta) and c.alpha_tilde == pytest.approx(one.alpha_tilde)


def test_complete_graph_has_chi1_equal_chi2() -> None:
    """Λ = r n/(n−1) (I − J/n): χ₁ = χ₂ = (n−1)/(rn), so the momentum would do nothing (α̃ = ½)."""
    c = graph.constants("complete", 5, 1.0)
    assert (c.chi1, c.chi2, c.alpha_tilde) == pytest.approx((0.8, 0.8, 0.5))


def test_exponential_graph_lists_the_antipode_twice() -> None:
    assert graph.neighbours("exponential", 1, 8) == [2, 3, 5, 0, 7, 5]  # odd rank: plus half first
    assert "power-of-two" in graph.graph_problem("exponential", 12)


# --------------------------------------------------------------------------- dynamics
@pytest.mark.smoke
def test_mixing_is_the_exact_flow_and_composes() -> None:
    """The closed form equals expm of the 2×2 generator, keeps x + x̃, and applying it lazily over two intervals
    equals one application over their sum (so when the events fall does not change the result)."""
    eta, dt = 0.37, 1.7
    gen = torch.Generator().manual_seed(0)
    x, xt = torch.randn(5, generator=gen, dtype=torch.float64), torch.randn(5, generator=gen, dtype=torch.float64)
    flow = torch.linalg.matrix_exp(torch.tensor([[-eta, eta], [eta, -eta]], dtype=torch.float64) * dt)
    want = flow @ torch.stack([x, xt])
    a, b = x.clone(), xt.clone()
    dynamics.mix_(a, b, eta, dt)
    assert torch.allclose(a, want[0]) and torch.allclose(b, want[1])
    assert torch.allclose(a + b, x + xt)
    c, d = x.clone(), xt.clone()
    dynamics.mix_(c, d, eta, 0.5)
    dynamics.mix_(c, d, eta, dt - 0.5)
    assert torch.allclose(c, a) and torch.allclose(d, b)
    with pytest.raises(ValueError, match="backwards"):
        dynamics.mix_(a, b, eta, -1.0)


def test_pairwise_averaging_as_the_reference_applies_it() -> None:
    """Both sides of a pair end at the mean; x̃ moves by α̃ (x_j − x_i) on each side, so Σ x̃ is kept too."""
    xi, xj = torch.tensor([1.0, 3.0]), torch.tensor([5.0, -1.0])
    ti, tj = torch.tensor([0.0, 0.0]), torch.tensor([2.0, 2.0])
    xi0, xj0 = xi.clone(), xj.clone()
    dynamics.average_(xi, ti, xj0, 0.5, 1.5)
    dynamics.average_(xj, tj, xi0, 0.5, 1.5)
    assert torch.equal(xi, xj) and torch.equal(xi, (xi0 + xj0) / 2)
    assert torch.equal(ti, 1.5 * (xj0 - xi0)) and torch.equal(ti + tj, torch.tensor([2.0, 2.0]))


# --------------------------------------------------------------------------- params, plan
def test_acid_on_the_complete_graph_is_one_clear_error() -> None:
    params = get_method("acid").cls.Params
    with pytest.raises(ValidationError, match="undefined on the complete graph"):
        params(topology="complete")
    assert params(topology="complete", apply_acid=False).topology == "complete"


@pytest.mark.parametrize("config", ["imagenet-ring-n16-r1.yaml", "imagenet-exponential-n64-r2.yaml", "train16.yaml"])
def test_plan_prints_the_constants_of_the_run(config: str) -> None:
    plan = build_plan(repo_root() / "methods" / "acid" / "configs" / config)["method_plan"]
    c = graph.constants(plan["topology"], plan["world_size"], plan["rate"])
    assert plan["eta"] == pytest.approx(c.eta) and plan["alpha_tilde"] == pytest.approx(c.alpha_tilde)
    assert plan["topology"] in ("ring", "exponential") and plan["world_size"] in (16, 64)


def test_paper_setting_configs_cover_both_graphs_sizes_and_rates() -> None:
    folder = repo_root() / "methods" / "acid" / "configs"
    for topo in ("ring", "exponential"):
        for n in (16, 32, 64):
            for r in (1, 2):
                assert (folder / f"imagenet-{topo}-n{n}-r{r}.yaml").is_file()


# --------------------------------------------------------------------------- runs
def _gossip(**params: Any) -> dict[str, Any]:
    return {
        "method": "acid",
        "profile": "hetero-2fast-2slow",
        "method_params": {"topology": "ring", "init_spread": 0.01, "apply_gradients": False, **params},
        "dataset": {"params": {"train_size": 512, "test_size": 32, "image_size": 8}},
        "model": {"name": "small_cnn", "params": {"hidden": 8}},
        "batch_size": 8,
        "budget": {"steps": 12},
        "eval": {"every_steps": 4},
    }


def _flat(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([t.detach().reshape(-1) for t in model.state_dict().values()])


def test_in_process_runs_are_bitwise_deterministic(profiles: Path) -> None:
    cfg = validate_config(_gossip(apply_gradients=True, init_spread=0.0))
    a, b = (InProcessEngine().run(build_job(cfg, 0)) for _ in range(2))
    assert torch.equal(_flat(a.models[0]), _flat(b.models[0]))
    assert [e.metrics for e in a.evals] == [e.metrics for e in b.evals]
    assert [(w.clock_s, w.idle_s, w.bytes_sent) for w in a.final.workers] == [
        (w.clock_s, w.idle_s, w.bytes_sent) for w in b.final.workers
    ]
    assert a.final.method_records["averagings_per_step"] > 0
    idle = summary_metrics(build_job(cfg, 0), a)["final/idle_fraction"]  # Σ idle / Σ clock over the workers
    assert idle == pytest.approx(sum(w.idle_s for w in a.final.workers) / sum(w.clock_s for w in a.final.workers))
    assert 0 < idle < 1  # the half-speed ranks make their neighbours wait for a partner


def test_gossip_alone_reaches_consensus_with_and_without_the_momentum(profiles: Path) -> None:
    for acid in (False, True):
        run = InProcessEngine().run(build_job(validate_config(_gossip(apply_acid=acid)), 0))
        distances = [e.metrics["consensus_distance"] for e in run.evals]
        assert distances[-1] < 0.2 * distances[0], (acid, distances)


def test_a_gossip_only_arm_computes_no_gradient_yet_runs_as_with_them(
    profiles: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``apply_gradients: false`` throws the gradients away: no backward runs, yet every evaluation (losses, clocks,
    consensus) and every worker's time is bit for bit the run that computed them (forced here)."""
    cfg = validate_config({**_gossip(apply_acid=True), "budget": {"steps": 6}, "eval": {"every_steps": 3}})
    jobs = [build_job(cfg, 0) for _ in range(2)]  # before counting: a job's FLOP probe runs a backward
    backwards: list[int] = []
    original_backward = torch.Tensor.backward

    def counting(self: torch.Tensor, *args: Any, **kwargs: Any) -> None:
        backwards.append(1)
        original_backward(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "backward", counting)
    lean = InProcessEngine().run(jobs[0])
    assert backwards == []
    original_fb = HarnessWorker.forward_backward

    def with_gradients(self: HarnessWorker, batch: Any, *args: Any, **kwargs: Any) -> float:
        return original_fb(self, batch, *args, **{**kwargs, "backward": True})

    monkeypatch.setattr(HarnessWorker, "forward_backward", with_gradients)
    full = InProcessEngine().run(jobs[1])
    assert len(backwards) == sum(w.gradients for w in full.final.workers) > 0  # one per gradient of the full run
    assert [e.metrics for e in lean.evals] == [e.metrics for e in full.evals]
    assert [e.workers for e in lean.evals] == [e.workers for e in full.evals]  # clocks, compute, idle, gradients
    assert torch.equal(_flat(lean.models[0]), _flat(full.models[0]))


class _Ctx:
    """The parts of a WorkerContext ``Method.setup`` and the gossip endpoint read."""

    def __init__(self) -> None:
        torch.manual_seed(0)
        self.rank, self.world_size = 0, 4
        self.model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
        self.rng = torch.Generator().manual_seed(0)
        self.comm = self

    def register_optimizer(self, opt: torch.optim.Optimizer) -> torch.optim.Optimizer:
        return opt

    def gossip_agent(self, neighbours: list[int], endpoint: Any) -> object:
        return object()


@pytest.mark.smoke
def test_the_replica_lives_in_one_flat_buffer_that_events_update_in_place() -> None:
    """The parameters are views of the method's x (no copy to a flat vector and back at each event): an averaging
    received writes x, and the module's parameters are x."""
    plugin: Any = get_method("acid").cls
    method = plugin(plugin.Params(apply_acid=False))
    ctx = _Ctx()
    method.setup(ctx)
    x, params = method.x, list(ctx.model.parameters())
    offsets = [0, 12, 16, 24]  # 4x3 weight, 4 bias, 2x4 weight, 2 bias
    assert [p.data_ptr() for p in params] == [x[o:].data_ptr() for o in offsets] and x.numel() == 26
    assert method.snapshot() is x
    peer = torch.arange(26, dtype=x.dtype)
    expected = x + 0.5 * (peer - x)  # α = ½ for the baseline
    method.receive(0.0, 1, peer)
    assert method.x is x and torch.equal(x, expected)
    assert torch.equal(torch.cat([p.detach().reshape(-1) for p in ctx.model.parameters()]), expected)
