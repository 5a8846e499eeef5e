"""Asynchronous randomized pairwise gossip (AD-PSGD-like), the A²CiD² paper's baseline.

Each worker computes gradients at its own pace (``synchronous = False``: no step is shared).
After each gradient step it performs a number of pairwise averagings drawn from Poisson(rate)
(or exactly ``rate`` on average with ``poisson: false``); for each it asks the pairing
coordinator for a neighbour on the graph that is also ready, swaps full parameter vectors
with it and both set x ← (x_i + x_j)/2. This is the dynamics of Nabli et al. (2023) with
α = 1/2 and no momentum copy, paired as their orchestrator pairs ready neighbours.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import torch
from pydantic import Field
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from distrepro import api


def neighbours(topology: str, rank: int, n: int) -> list[int]:
    """Neighbour list of ``rank``; the exponential graph keeps i ± n/2 twice (double weight), as the
    reference ``utils/graph_utils.py`` does."""
    if n < 2:
        return []
    if topology == "ring":
        return sorted({(rank - 1) % n, (rank + 1) % n})
    if topology == "complete":
        return [j for j in range(n) if j != rank]
    if topology == "exponential":
        k = int(math.log2(n))
        plus = [(rank + 2**i) % n for i in range(k)]
        minus = [(rank - 2**i) % n for i in range(k)]
        return minus + plus if rank % 2 == 0 else plus + minus
    raise ValueError(f"unknown topology {topology!r}")


class Params(api.MethodParams):
    lr: api.PeakLR = 0.05
    momentum: api.Momentum = 0.9
    weight_decay: api.WeightDecay = 0.0
    topology: Literal["ring", "exponential", "complete"] = "ring"
    rate: float = Field(default=1.0, ge=0)  # expected pairwise averagings per gradient step ("com/∇")
    poisson: bool = True


def _problem(p: Params, world_size: int) -> str | None:
    """Why the graph cannot be built on ``world_size`` workers, or None."""
    if p.topology == "exponential" and world_size & (world_size - 1):
        return f"the exponential graph needs a power-of-two world size, not {world_size}"
    if world_size < 2:
        return "gossip needs at least two workers"
    return None


class Method(api.Method[Params]):
    name = "gossip"
    exchange = "neighbour"  # pairwise averagings with a neighbour of the graph
    synchronous = False

    @classmethod
    def plan(cls, params: Params, setting: api.PlanSetting) -> api.MethodPlan | None:
        """The graph (each rank's neighbours; a neighbour listed twice is picked twice as often), how many
        pairwise averagings follow a gradient step, their mixing weights and the bytes each one exchanges.
        Priced as ``rate`` swaps of the parameters per gradient step, each between two ranks (pairings depend on
        who is ready when; the plan prices a pair across nodes)."""
        p, k = params, setting.cluster.world_size
        graph = [neighbours(p.topology, r, k) for r in range(k)] if k >= 2 else []
        draw = f"Poisson({p.rate})" if p.poisson else f"{p.rate} on average, deterministic carry"
        out: dict[str, Any] = {
            "topology": p.topology,
            "neighbours": graph,
            "pick_weights": [{str(j): n.count(j) / len(n) for j in sorted(set(n))} for n in graph],
            "averagings_per_step": draw,
            "mixing": "x_i, x_j <- (x_i + x_j) / 2 (weight 1/2 each, parameters only)",
            "bytes_per_averaging": setting.model_bytes,
            "expected_bytes_per_step": p.rate * setting.model_bytes,
        }
        why = _problem(p, k)
        if why:
            out["cannot_run"] = why
        swaps = (api.Transfer("gossip_pair", setting.model_bytes, count=p.rate),)
        return api.MethodPlan(transfers=swaps, not_estimated=why, facts=out)

    def skip(self, cluster: api.ClusterLayout) -> str | None:
        return _problem(self.params, cluster.world_size)

    def setup(self, ctx: api.WorkerContext) -> None:
        p = self.params
        if p.rate < 0:
            raise ValueError("rate must be >= 0")
        self.opt = ctx.register_optimizer(api.sgd(ctx.model, p.lr, p.momentum, p.weight_decay))
        self.neighbours = neighbours(p.topology, ctx.rank, ctx.world_size)
        self.carry = 0.0

    def _count(self, ctx: api.WorkerContext) -> int:
        p = self.params
        if p.poisson:
            return int(torch.poisson(torch.tensor([p.rate], dtype=torch.float64), generator=ctx.rng).item())
        self.carry += p.rate
        k = int(self.carry)
        self.carry -= k
        return k

    def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None:
        ctx.forward_backward(batch)
        self.opt.step()
        params = list(ctx.model.parameters())
        done = 0
        for _ in range(self._count(ctx)):
            order = torch.randperm(len(self.neighbours), generator=ctx.rng).tolist()
            peer = ctx.comm.pair([self.neighbours[i] for i in order])
            if peer is None:
                break
            with torch.no_grad():
                mine = parameters_to_vector(params)
                theirs = ctx.comm.exchange(peer, mine)
                vector_to_parameters(mine.add_(theirs).mul_(0.5), params)
            done += 1
        ctx.record("averagings_per_step", done)
