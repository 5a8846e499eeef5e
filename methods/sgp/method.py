"""Stochastic Gradient Push (Assran et al., ICML 2019) on the one-peer directed exponential graph.

Decent-DP's third baseline in its strong-scaling figure ("SGP (Exp)", Wang et al., ICLR 2025, Fig. 6).
Each iteration every rank takes a local optimizer step, then pushes half of its parameters (and half of its
push-sum weight) to the single out-neighbour ``(i + 2^r) mod n``, ``r = k mod log2 n``, and keeps the other
half (Assran et al., Alg. 1, one peer per iteration). On this graph every rank has exactly one in-neighbour,
so the push-sum weights stay 1 and de-biasing is the identity: ``x_i <- (x_i + x_{i-2^r}) / 2``.

The push is blocking (the synchronous SGP of Alg. 1; the overlapped variant, OSGP, is not what the figure's
legend names). A directed send is issued as a non-blocking two-rank broadcast from the sender, so each rank
has one outgoing and one incoming message in flight at once and both share its NIC as the hardware would.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from distrepro import api


def _default_optimizer() -> api.OptimizerConfig:
    # the All-Reduce Adam recipe of the Decent-DP Transformer experiments (lr 7e-4, betas (0.9, 0.98), eps 1e-9)
    return api.OptimizerConfig(name="adam", lr=7e-4, betas=(0.9, 0.98), eps=1e-9)


def out_peer(rank: int, world_size: int, step: int) -> int:
    """The out-neighbour of ``rank`` at iteration ``step`` (0-based) on the one-peer exponential graph."""
    k = int(math.log2(world_size))
    return (rank + 2 ** (step % k)) % world_size


class Params(api.MethodParams):
    optimizer: api.OptimizerConfig = _default_optimizer()


class Method(api.Method[Params]):
    synchronous = True
    accepts_optimizer = True

    def skip(self, cluster: api.ClusterLayout) -> str | None:
        world_size = cluster.world_size
        if world_size < 2 or world_size & (world_size - 1):
            return f"the one-peer exponential graph needs a power-of-two world size >= 2, not {world_size}"
        return None

    def setup(self, ctx: api.WorkerContext) -> None:
        self.opt = ctx.build_optimizer(ctx.model.parameters(), self.params.optimizer)
        self.groups: dict[tuple[int, ...], api.Group] = {}
        self.step = 0

    def _group(self, ctx: api.WorkerContext, ranks: tuple[int, ...]) -> api.Group:
        key = tuple(sorted(ranks))
        if key not in self.groups:
            self.groups[key] = ctx.comm.new_group(key)
        return self.groups[key]

    def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None:
        ctx.forward_backward(batch)
        self.opt.step()
        n, r = ctx.world_size, ctx.rank
        send_to = out_peer(r, n, self.step)
        recv_from = (2 * r - send_to) % n  # r - 2^k
        self.step += 1
        params = list(ctx.model.parameters())
        with torch.no_grad():
            mine = parameters_to_vector(params)
            inbox = torch.empty_like(mine)
            # (group, src) in the same order on both members of a group: two pushes on one pair (2^k = n/2)
            # are then matched in order
            calls = sorted(
                [((r, send_to), r, mine), ((recv_from, r), recv_from, inbox)], key=lambda c: (sorted(c[0]), c[1])
            )
            works: list[Any] = []
            for ranks, src, tensor in calls:
                works.append(ctx.comm.broadcast(tensor, src=src, group=self._group(ctx, ranks), async_op=True))
            for work in works:
                work.wait()
            vector_to_parameters(mine.add_(inbox).mul_(0.5), params)

    @classmethod
    def plan(cls, params: Params, setting: api.PlanSetting) -> dict[str, Any] | None:
        """One directed push of the parameters per step (a two-rank broadcast)."""
        return {"comm": [{"pattern": "broadcast", "bytes": setting.model_bytes, "per_step": 1}]}
