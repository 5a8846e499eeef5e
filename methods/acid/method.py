"""A²CiD² (Nabli, Belilovsky, Oyallon, NeurIPS 2023) and its asynchronous pairwise-gossip baseline.

Each worker computes gradients at its own pace (``synchronous = False``) while pairwise averagings with
ready neighbours run beside its computation, ``rate`` of them per gradient in expectation (the paper's
"com/∇"). With ``apply_acid`` each worker also carries the continuous momentum x̃ (:mod:`.dynamics`), mixed
with x by the exact flow of its ODE over the virtual time since the worker's last event, applied lazily at
each event; η and α̃ come from the graph's Laplacian at this rate (:mod:`.graph`, Prop. 3.6). Without it,
this is the AD-PSGD-like baseline of the paper's §4 (α = ½, no x̃).

How gossip runs beside computation. The engine's gossip agent (:mod:`distrepro.api.gossip`: in-process, a virtual-time
actor; dist engine, a thread per rank) pairs and exchanges during the worker's computation, as the reference's
gossip process does, with this method as its endpoint. Each step is: gradient; the averagings that ended
meanwhile are applied (``sync``); the gradient event (mix forward, step x, the same step on x̃); the barrier
waits until this interval's quota (``rate``, Poisson draws with ``poisson: true``) is done and owes the next.
"""

from __future__ import annotations

from typing import Any, Literal

import torch
from pydantic import Field, model_validator
from torch.nn.utils import clip_grad_norm_

from distrepro import api

from . import dynamics, graph


class Params(api.MethodParams):
    lr: api.PeakLR = 0.1
    momentum: api.Momentum = 0.9
    weight_decay: api.WeightDecay = 5e-4
    topology: Literal["ring", "exponential", "complete"] = "ring"
    #: expected pairwise averagings per worker per gradient ("com/∇", the reference's ``rate_com``)
    rate: float = Field(default=1.0, gt=0)
    #: the continuous momentum x̃ (A²CiD²); false: the asynchronous baseline
    apply_acid: bool = True
    #: Poisson(rate) averagings per gradient (the reference's default); false: exactly ``rate`` per gradient
    poisson: bool = True
    #: clip the gradient norm before every step (the reference launcher's ``--normalize_grads``: 1.0); None: off
    clip_grad_norm: float | None = Field(default=None, gt=0)
    #: override η (None: from the graph, Prop. 3.6)
    eta: float | None = Field(default=None, ge=0)
    #: override α̃ (None: from the graph, Prop. 3.6)
    alpha_tilde: float | None = Field(default=None, ge=0)
    # ---- mechanism experiments (not in the reference; 0 / true leave training as the paper runs it)
    #: each worker moves its replica by N(0, init_spread²) per parameter at setup: distinct starting points,
    #: whose consensus the gossip then restores (pure-gossip consensus claims)
    init_spread: float = Field(default=0.0, ge=0)
    #: false: gradients are neither computed nor applied, only charged (time passes as in training; the forward runs
    #: for the logged loss); only gossip moves x
    apply_gradients: bool = True
    #: heterogeneous objectives: worker i's gradient gets a fixed c_i ~ N(0, gradient_shift²) per parameter,
    #: i.e. its objective is f + ⟨c_i, x⟩ (the c_i differ across workers, so their optima do)
    gradient_shift: float = Field(default=0.0, ge=0)

    @model_validator(mode="after")
    def _acid_needs_a_sparse_graph(self) -> Params:
        if self.apply_acid and self.topology == "complete":
            raise ValueError(
                "apply_acid: A²CiD² is undefined on the complete graph (chi1 = chi2, the reference refuses it);"
                " use topology ring or exponential, or apply_acid: false"
            )
        return self


def resolved_constants(params: Params, world_size: int) -> dict[str, Any]:
    """η, α̃ and the graph quantities the run uses: the graph's (Prop. 3.6) unless overridden."""
    c = graph.constants(params.topology, world_size, params.rate)
    eta = c.eta if params.eta is None else params.eta
    alpha_tilde = c.alpha_tilde if params.alpha_tilde is None else params.alpha_tilde
    return {
        "topology": params.topology,
        "world_size": world_size,
        "rate": params.rate,
        "apply_acid": params.apply_acid,
        "chi1": c.chi1,
        "chi2": c.chi2,
        "alpha": c.alpha,
        "eta": eta if params.apply_acid else 0.0,
        "alpha_tilde": alpha_tilde,
        "graph_eta": c.eta,
        "graph_alpha_tilde": c.alpha_tilde,
    }


class Method(api.Method[Params]):
    synchronous = False
    exchange = "neighbour"  # pairwise averagings with a neighbour of the graph
    reference_check = (
        "tests/methods/test_acid_reference.py against github AdelNabli/ACiD @ 89393fd (its update rules restated, "
        "driven with the same scripted events)"
    )

    @classmethod
    def plan(cls, params: Params, setting: api.PlanSetting) -> api.MethodPlan | None:
        """The constants the run will use, for the graph it will run on (η = 0 for the baseline)."""
        n = setting.cluster.world_size
        problem = graph.graph_problem(params.topology, n)
        if problem is not None:
            facts = {"topology": params.topology, "world_size": n, "rate": params.rate, "skip": problem}
            return api.MethodPlan(not_estimated=problem, facts=facts)
        plan = resolved_constants(params, n)
        plan["exchanges_per_worker_per_step"] = params.rate
        plan["exchange_bytes"] = setting.model_bytes
        # the gossip agent swaps parameters while the worker computes: ``rate`` swaps per gradient step, overlapped
        swaps = (api.Transfer("gossip_pair", setting.model_bytes, count=params.rate, overlaps_compute=True),)
        return api.MethodPlan(transfers=swaps, facts=plan)

    def skip(self, cluster: api.ClusterLayout) -> str | None:
        return graph.graph_problem(self.params.topology, cluster.world_size)

    def setup(self, ctx: api.WorkerContext) -> None:
        p = self.params
        self.opt = ctx.register_optimizer(api.sgd(ctx.model, p.lr, p.momentum, p.weight_decay))
        self.params_list = list(ctx.model.parameters())
        self.neighbours = graph.neighbours(p.topology, ctx.rank, ctx.world_size)
        consts = resolved_constants(p, ctx.world_size)
        self.eta, self.alpha, self.alpha_tilde = consts["eta"], consts["alpha"], consts["alpha_tilde"]
        #: √(χ₁/χ₂): how much less communication A²CiD²'s condition asks than the baseline's (√(χ₁χ₂) vs χ₁)
        self.acceleration = (consts["chi1"] / consts["chi2"]) ** 0.5
        #: the graph's mixing time in gradient-time units (chi1 = 1 / the Laplacian's smallest nonzero eigenvalue)
        self.chi1 = float(consts["chi1"])
        with torch.no_grad():
            if p.init_spread > 0:
                for q in self.params_list:
                    # drawn on the CPU from the worker's generator (the same numbers on every device), then moved
                    noise = torch.randn(q.shape, generator=ctx.rng, dtype=q.dtype).to(q.device)
                    q.add_(noise, alpha=p.init_spread)
        #: x: the replica's parameters, which are views of it (api.flat_parameters): every event acts on it in place
        self.x = api.flat_parameters(self.params_list)
        self.shift = None
        if p.gradient_shift > 0:
            gen = torch.Generator().manual_seed(ctx.seed("acid-gradient-shift"))
            sigma = p.gradient_shift
            self.shift = [
                (sigma * torch.randn(q.shape, generator=gen, dtype=q.dtype)).to(q.device) for q in self.params_list
            ]
        self.x_tilde = self.x.clone() if p.apply_acid else None  # x̃ starts at x (the reference: after averaging inits)
        self.t_last: float | None = None  # virtual time of this worker's last event
        self.unit: float | None = None  # seconds per gradient: the ODE's time unit (EMA, as the reference)
        self.rng = ctx.rng
        #: the engine's gossip agent: exchanges during the computation, as the reference's gossip process
        agent = ctx.comm.gossip_agent(self.neighbours, self)
        if agent is None:
            raise api.CommError(
                "acid needs an engine with a gossip agent (Comm.gossip_agent); the in-process and dist engines have one"
            )
        self.agent = agent
        self.started = False

    # ------------------------------------------------------------------ gossip endpoint (distrepro.api.gossip)
    def candidates(self) -> list[int]:
        order = torch.randperm(len(self.neighbours), generator=self.rng).tolist()
        return [self.neighbours[i] for i in order]

    def snapshot(self) -> torch.Tensor:
        return self.x  # x itself: both engines' agents copy what they send (distrepro.api.gossip)

    def receive(self, t: float, peer: int, vector: torch.Tensor) -> None:
        with torch.no_grad():
            x = self._mix_to(t)
            dynamics.average_(x, self.x_tilde, vector, self.alpha, self.alpha_tilde)

    # ------------------------------------------------------------------ events
    def _mix_to(self, t: float) -> torch.Tensor:
        """Move (x, x̃) forward to virtual time ``t``, in place; returns x (the parameters' buffer)."""
        x = self.x
        if self.x_tilde is not None and self.t_last is not None and self.unit and t > self.t_last:
            dynamics.mix_(x, self.x_tilde, self.eta, (t - self.t_last) / self.unit)
        self.t_last = t if self.t_last is None else max(self.t_last, t)
        return x

    def _draw(self, ctx: api.WorkerContext) -> float:
        p = self.params
        if p.poisson:
            return float(torch.poisson(torch.tensor([p.rate], dtype=torch.float64), generator=ctx.rng).item())
        return p.rate  # a fraction stays owed until it adds up to one averaging

    # ------------------------------------------------------------------ step
    def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None:
        if self.t_last is None:
            self.t_last = ctx.clock.now()
        if not self.started:
            self.agent.start(self._draw(ctx))
            self.started = True
        spent = self._compute(ctx, batch)
        self.agent.sync()  # the averagings that ended during the computation are in x
        self._gradient_event(ctx, spent)
        done = self.agent.barrier(self._draw(ctx))  # the quota of this interval, then the next one's
        ctx.record("averagings_per_step", done)
        ctx.record("sqrt_chi1_over_chi2", self.acceleration)
        # regime of the accuracy claims: training long compared with the mixing time (one gradient = one time unit)
        ctx.record("mixing_times", (int(ctx.train_state["step"]) + 1) / self.chi1)

    def _compute(self, ctx: api.WorkerContext, batch: api.Batch) -> float:
        """Forward and backward; returns the compute time it took. The first one also sets the time unit (the
        reference measures it on an initialising gradient); the others enter it after their step. Without
        ``apply_gradients`` the gradient would be thrown away: the forward runs (its loss is logged) and the whole
        gradient's time is charged, but no backward is computed."""
        before = ctx.clock.compute_s
        ctx.forward_backward(batch, backward=self.params.apply_gradients)
        spent = ctx.clock.compute_s - before
        if self.unit is None:
            self.unit = spent
        return spent

    def _gradient_event(self, ctx: api.WorkerContext, spent: float) -> None:
        """Mix forward to now, the optimizer step on x, the same step on x̃; then this gradient's compute time
        ``spent`` enters the time unit (EMA ½), as the reference's ``ADP.step`` does after its step: the mixing up
        to and at this event, and that of averagings which ended during this gradient, uses the unit as it was."""
        p = self.params
        if self.shift is not None and p.apply_gradients:
            for q, c in zip(self.params_list, self.shift, strict=True):
                if q.grad is not None:
                    q.grad.add_(c)
        if p.clip_grad_norm is not None and p.apply_gradients:
            clip_grad_norm_(self.params_list, p.clip_grad_norm)
        with torch.no_grad():
            x = self._mix_to(ctx.clock.now())
            # the parameters are views of ``x``, so the step also moves ``x``: x̃ takes the step measured against
            # a copy of x from before it
            before = x.clone() if self.x_tilde is not None and p.apply_gradients else None
            if p.apply_gradients:
                self.opt.step()
            if self.x_tilde is not None and before is not None:  # x̃ takes exactly the step x took
                self.x_tilde.add_(x - before)
        self.unit = spent if self.unit is None else 0.5 * spent + 0.5 * self.unit

    def finalize(self, ctx: api.WorkerContext) -> None:
        """Finish the exchange in flight (the peer waits for it); the harness scores the average."""
        self.agent.close()

    def state_dict(self) -> dict[str, Any]:
        out = super().state_dict()
        out["x_tilde"] = ("value", None if self.x_tilde is None else self.x_tilde.tolist())
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        state = dict(state)
        _, xt = state.pop("x_tilde", ("value", None))
        super().load_state_dict(state)
        if xt is not None:
            like = self.params_list[0]
            self.x_tilde = torch.tensor(xt, dtype=like.dtype, device=like.device)
