"""A²CiD² (``methods/acid``) against the authors' code, restated: https://github.com/AdelNabli/ACiD at commit
``89393fd521e92520ba86c1da4cb6ef6afeb1fc74`` (its update rules last changed in ``e695889``).

The reference's rules are written out again below (not copied) as :class:`RefWorker`, from
``utils/acid_utils.py::acid_ode`` (the mixing: ``matrix_exp`` of [[−η, η], [η, −η]] over the elapsed time in
units of Δt_grad), ``adp.py::ADP.step`` (the gradient event: mix to now, ``optimizer.step()``,
x̃ −= lr · momentum buffer, then Δt_grad ← ½ · this gradient's time + ½ · Δt_grad), ``p2p_averaging.py::do_send``
/ ``do_recv`` (the exchange: mix to the exchange's end, x̃ += α̃ (x_j − x), ``x.lerp_(x_j, 0.5)``, x_j as the
peer sent it) and ``utils/graph_utils.py::compute_acid_constants`` (Λ, χ₁, χ₂, η, α̃).

Then the plugin's own event handlers (``Method._compute``, ``Method.receive``, ``Method.snapshot``,
``Method._gradient_event``; no engine) are driven with the same scripted events: on a ring of 4 workers, each
computes gradients of given lengths with given gradients, and pairwise exchanges start and end at given times,
some during a gradient (applied before its step, at their own times), some while the worker waits. Both must
end with the same x and x̃ on every worker, with and without the momentum.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn.utils import parameters_to_vector

from distrepro.plugins.registry import get_method, plugin_module

graph = plugin_module("acid", "graph")

DIM = 6
LR, MOMENTUM, WEIGHT_DECAY = 0.1, 0.9, 5e-4


# --------------------------------------------------------------------------- the reference, restated
def ref_neighbours(topology: str, rank: int, n: int) -> list[int]:
    """``CycleGraph`` / ``ExponentialGraph.create_cycle_neighbors`` (and, for the plain gossip, every other rank)."""
    if topology == "ring":  # the reference's "cycle"
        return [(rank + 1) % n, (rank - 1) % n] if rank % 2 else [(rank - 1) % n, (rank + 1) % n]
    if topology == "exponential":
        k = int(np.log2(n))
        first = [(rank + 2**i) % n if rank % 2 else (rank - 2**i) % n for i in range(k)]
        second = [(rank - 2**i) % n if rank % 2 else (rank + 2**i) % n for i in range(k)]
        return first + second
    return [j for j in range(n) if j != rank]


def ref_constants(topology: str, n: int, rate: float) -> tuple[float, float, float, float]:
    """``compute_laplacian``, ``compute_algebraic_connectivity``, ``compute_graph_resistance`` and the Prop. 3.6
    formulas of ``compute_acid_constants``: returns (χ₁, χ₂, η, α̃)."""
    w = np.zeros((n, n))
    for i in range(n):
        nb = ref_neighbours(topology, i, n)
        for j in nb:
            w[i, j] += 1 / len(nb)
    lap = rate * (np.eye(n) - w)
    chi1 = 1 / np.linalg.eigh(lap)[0][1]  # the second smallest eigenvalue (a connected graph)
    pinv = np.linalg.pinv(lap)
    chi2 = 0.0
    for i in range(n):
        for j in ref_neighbours(topology, i, n):
            e = np.zeros(n)
            e[i], e[j] = 1.0, -1.0
            chi2 = max(chi2, 0.5 * e @ pinv @ e)
    return chi1, chi2, 0.5 / np.sqrt(chi1 * chi2), 0.5 * np.sqrt(chi1 / chi2)


class RefWorker:
    """One worker's state in the reference: ``params_com`` (x), ``params_com_tilde`` (x̃), SGD's heavy-ball buffer
    (PyTorch's rule: buf ← μ buf + (g + wd x), x ← x − lr buf), ``t_last_spike`` and ``delta_t_grad``."""

    def __init__(self, x0: torch.Tensor, acid: bool, eta: float, alpha_tilde: float, clip: float | None) -> None:
        self.x, self.xt = x0.clone(), x0.clone()  # the gossip process sets x̃ = x after the initial average
        self.buf = torch.zeros_like(x0)
        self.acid, self.alpha_tilde, self.clip = acid, alpha_tilde, clip
        self.ode = torch.tensor([[-eta, eta], [eta, -eta]], dtype=torch.float64)
        self.t_spike = 0.0
        self.dt_grad: float | None = None  # the reference measures it on its initialising gradient
        self.t_beg = 0.0

    def acid_ode(self, t_new: float) -> None:
        assert self.dt_grad is not None
        m = torch.linalg.matrix_exp(self.ode * (t_new - self.t_spike) / self.dt_grad)
        x_old = self.x.clone()
        self.x = m[0, 0] * self.x + m[0, 1] * self.xt
        self.xt = m[1, 1] * self.xt + m[1, 0] * x_old
        self.t_spike = t_new

    def start(self, t: float, duration: float) -> None:
        """``ADP.start``; here the reference's first measured gradient time stands for its initialising one."""
        self.t_beg = t
        if self.dt_grad is None:
            self.dt_grad = duration

    def step(self, t: float, grad: torch.Tensor) -> None:
        if self.acid:
            self.acid_ode(t)
        if self.clip is not None:  # ``--normalize_grads``: clip_grad_norm_(…, 1.0) before the step
            norm = float(grad.norm())
            grad = grad * min(1.0, self.clip / (norm + 1e-6))
        self.buf = MOMENTUM * self.buf + (grad + WEIGHT_DECAY * self.x)
        self.x = self.x - LR * self.buf
        if self.acid:
            self.xt = self.xt - LR * self.buf
            assert self.dt_grad is not None
            self.dt_grad = 0.5 * (t - self.t_beg) + 0.5 * self.dt_grad

    def exchange(self, t: float, peer_sent: torch.Tensor) -> None:
        if self.acid:
            self.acid_ode(t)
            self.xt = self.xt + self.alpha_tilde * (peer_sent - self.x)
        self.x = torch.lerp(self.x, peer_sent, 0.5)


# --------------------------------------------------------------------------- the scripted events
#: per worker, its gradients as (start, end); between them the worker waits at the barrier
GRADIENTS = {
    0: [(0.0, 1.0), (1.5, 2.4), (3.0, 4.1), (4.5, 5.3)],
    1: [(0.0, 1.2), (1.6, 2.5), (3.1, 3.9), (4.4, 5.6)],
    2: [(0.0, 0.9), (1.4, 2.6), (3.0, 4.0), (4.6, 5.5)],
    3: [(0.0, 1.1), (1.7, 2.7), (3.2, 4.3), (4.5, 5.4)],
}
#: (i, j, start, end) on the ring's edges; no worker in two at once; some during a gradient, some while waiting
EXCHANGES = [
    (0, 1, 0.2, 0.5),
    (2, 3, 0.3, 0.6),
    (0, 3, 1.05, 1.45),
    (1, 2, 1.25, 1.35),
    (0, 1, 2.0, 2.2),
    (1, 2, 2.3, 2.8),
    (0, 3, 2.75, 2.95),
    (2, 3, 3.3, 3.7),
    (0, 1, 3.5, 3.6),
    (1, 2, 4.05, 4.3),
    (0, 3, 4.2, 4.4),
    (0, 1, 4.95, 5.1),
    (2, 3, 5.0, 5.2),
]


def gradient(rank: int, k: int, scale: float) -> torch.Tensor:
    return scale * torch.randn(DIM, generator=torch.Generator().manual_seed(100 * rank + k), dtype=torch.float64)


def timeline() -> list[tuple[float, int, str, tuple[Any, ...]]]:
    """Every event in time order: (time, order at equal times, kind, data)."""
    ev: list[tuple[float, int, str, tuple[Any, ...]]] = []
    for r, grads in GRADIENTS.items():
        for k, (s, e) in enumerate(grads):
            ev.append((s, 0, "compute", (r, k, e - s)))
            ev.append((e, 1, "step", (r, k)))
    for i, j, s, e in EXCHANGES:
        ev.append((s, 2, "send", (i, j)))
        ev.append((e, 3, "average", (i, j)))
    ev.sort(key=lambda item: (item[0], item[1]))
    return ev


def initial(rank: int) -> torch.Tensor:
    """Distinct starting points (as ``init_spread`` gives), so the averaging has something to do from the start."""
    return torch.randn(DIM, generator=torch.Generator().manual_seed(7 + rank), dtype=torch.float64)


def run_reference(acid: bool, topology: str, clip: float | None, scale: float) -> list[RefWorker]:
    _, _, eta, alpha_tilde = ref_constants(topology, 4, 1.0)
    ws = [RefWorker(initial(r), acid, eta, alpha_tilde, clip) for r in range(4)]
    sent: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = {}
    for t, _, kind, data in timeline():
        if kind == "compute":
            r, _, duration = data
            ws[r].start(t, duration)
        elif kind == "step":
            r, k = data
            ws[r].step(t, gradient(r, k, scale))
        elif kind == "send":  # both send x as it is now (``dist.send(params_com)``)
            i, j = data
            sent[(i, j)] = (ws[i].x.clone(), ws[j].x.clone())
        else:
            i, j = data
            xi, xj = sent.pop((i, j))
            ws[i].exchange(t, xj)
            ws[j].exchange(t, xi)
    return ws


# --------------------------------------------------------------------------- the plugin, driven event by event
class _Flat(nn.Module):
    def __init__(self, x0: torch.Tensor) -> None:
        super().__init__()
        self.w = nn.Parameter(x0.clone())


@dataclass
class _Clock:
    t: float = 0.0
    compute_s: float = 0.0

    def now(self) -> float:
        return self.t


class _Comm:
    def gossip_agent(self, neighbours: list[int], endpoint: Any) -> object:
        return object()  # the agent is not used: the test plays its part


class _Ctx:
    """The parts of a WorkerContext the plugin's setup and event handlers read."""

    def __init__(self, rank: int, world_size: int) -> None:
        self.rank, self.world_size = rank, world_size
        self.model = _Flat(initial(rank))
        self.clock = _Clock()
        self.comm = _Comm()
        self.rng = torch.Generator().manual_seed(rank)
        self.grad: torch.Tensor | None = None
        self.duration = 0.0

    def register_optimizer(self, opt: torch.optim.Optimizer) -> torch.optim.Optimizer:
        return opt

    def seed(self, name: str) -> int:
        return 0

    def forward_backward(self, batch: Any, backward: bool = True) -> float:
        """The gradient is given; the compute takes the given time (what the plugin's time unit measures)."""
        assert self.grad is not None and backward
        self.model.w.grad = self.grad.clone()
        self.clock.compute_s += self.duration
        self.clock.t += self.duration
        return 0.0


def run_plugin(acid: bool, topology: str, clip: float | None, scale: float) -> list[Any]:
    plugin = get_method("acid")
    params = plugin.cls.Params(
        topology=topology,
        apply_acid=acid,
        lr=LR,
        momentum=MOMENTUM,
        weight_decay=WEIGHT_DECAY,
        rate=1.0,
        clip_grad_norm=clip,
    )
    ctxs = [_Ctx(r, 4) for r in range(4)]
    methods = [plugin.cls(params) for _ in range(4)]
    for m, ctx in zip(methods, ctxs, strict=True):
        m.setup(ctx)
    sent: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = {}
    spent: dict[int, float] = {}
    for t, _, kind, data in timeline():
        if kind == "compute":  # ``train_step``: t_last set at the first step, then the gradient is computed
            r, k, duration = data
            m, ctx = methods[r], ctxs[r]
            ctx.clock.t = t
            if m.t_last is None:
                m.t_last = ctx.clock.now()
            ctx.grad, ctx.duration = gradient(r, k, scale), duration
            spent[r] = m._compute(ctx, None)
        elif kind == "step":  # after ``agent.sync()`` applied the averagings that ended meanwhile
            r, _ = data
            ctxs[r].clock.t = t
            methods[r]._gradient_event(ctxs[r], spent.pop(r))
        elif kind == "send":  # the agent snapshots both vectors at the exchange's start
            i, j = data
            sent[(i, j)] = (methods[i].snapshot().clone(), methods[j].snapshot().clone())
        else:  # and has both endpoints receive the other's at its end
            i, j = data
            xi, xj = sent.pop((i, j))
            methods[i].receive(t, j, xj)
            methods[j].receive(t, i, xi)
    return methods


def _check(acid: bool, topology: str, clip: float | None = None, scale: float = 0.3) -> None:
    ref = run_reference(acid, topology, clip, scale)
    ours = run_plugin(acid, topology, clip, scale)
    for r in range(4):
        x = parameters_to_vector(ours[r].params_list).detach()
        torch.testing.assert_close(x, ref[r].x, rtol=1e-12, atol=1e-12)
        if acid:
            torch.testing.assert_close(ours[r].x_tilde, ref[r].xt, rtol=1e-12, atol=1e-12)
        else:
            assert ours[r].x_tilde is None
    # the script exercises the dynamics: the workers neither agree nor sit where they started
    assert not torch.allclose(ref[0].x, ref[1].x)
    assert not torch.allclose(ref[0].x, initial(0))
    if acid:
        assert not torch.allclose(ref[0].x, ref[0].xt)


# --------------------------------------------------------------------------- tests
@pytest.mark.smoke
def test_plain_gossip_equals_the_reference() -> None:
    """``apply_acid: false`` (the reference without ``--apply_acid``): lerp to the peer's x, SGD steps."""
    _check(acid=False, topology="ring")


def test_plain_gossip_on_the_complete_graph_equals_the_reference() -> None:
    _check(acid=False, topology="complete")


@pytest.mark.smoke
def test_acid_momentum_equals_the_reference() -> None:
    """A²CiD² on the ring of 4: the mixing over each worker's elapsed time in its own Δt_grad units (an EMA
    of its gradient times, updated after each step), x̃ += α̃ (x_j − x) at exchanges, x̃ takes x's step."""
    _check(acid=True, topology="ring")


def test_acid_momentum_with_gradient_clipping_equals_the_reference() -> None:
    """The launcher's ``--normalize_grads`` (norm 1.0; the gradients here are larger) before the step."""
    _check(acid=True, topology="ring", clip=1.0, scale=2.0)


def test_acid_momentum_without_gradients_equals_the_reference() -> None:
    """Gradients of zero: only the exchanges, the mixing and the weight decay move the workers."""
    _check(acid=True, topology="ring", scale=0.0)


@pytest.mark.parametrize("topology", ["ring", "exponential"])
@pytest.mark.parametrize("n", [4, 8, 16])
@pytest.mark.parametrize("rate", [1.0, 2.0])
def test_constants_equal_the_reference(topology: str, n: int, rate: float) -> None:
    chi1, chi2, eta, alpha_tilde = ref_constants(topology, n, rate)
    c = graph.constants(topology, n, rate)
    assert (c.chi1, c.chi2, c.eta, c.alpha_tilde, c.alpha) == pytest.approx((chi1, chi2, eta, alpha_tilde, 0.5))
    # the same lists up to order (the order matters only to the reference's ``--deterministic_neighbor``)
    for r in range(n):
        assert sorted(graph.neighbours(topology, r, n)) == sorted(ref_neighbours(topology, r, n))
