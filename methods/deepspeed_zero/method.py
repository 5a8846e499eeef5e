"""DeepSpeed ZeRO-1/2 data parallelism, modelled on the harness: DDP's math, ZeRO's traffic.

Why a model and not DeepSpeed itself: the C-ADP paper compares against DeepSpeed, and what sets
ZeRO-1/2 apart from DDP on a data-parallel run is *where the optimizer step happens and what goes
on the wire*, not the gradient: every rank computes its gradient, the gradients are
**reduce-scattered** (each rank receives the mean of its 1/p partition), each rank updates only its
partition of the parameters with its partition of the optimizer state (momentum), and the updated
partitions are **all-gathered** back into every replica. With SGD + momentum this is bit-for-bit
the update DDP makes (elementwise), so any difference between the arms is the time model's.
Gradients are averaged with equal weights over ranks, as DeepSpeed divides by the data-parallel
world size whatever the local micro-batch. Floating buffers (BatchNorm statistics) are broadcast
from rank 0 as in ``ar_sgd`` so the two arms stay comparable.
"""

from __future__ import annotations

import math
from typing import Literal

import torch

from distrepro import api


class Params(api.MethodParams):
    lr: api.PeakLR = 0.05
    momentum: api.Momentum = 0.9
    weight_decay: api.WeightDecay = 0.0
    stage: Literal[1, 2] = 2  # same wire pattern in this model (README)


class Method(api.Method[Params]):
    name = "deepspeed_zero"
    synchronous = True

    @classmethod
    def plan(cls, params: Params, setting: api.PlanSetting) -> api.MethodPlan | None:
        """What is modelled of ZeRO and what goes on the wire per step: one reduce-scatter of the flat
        gradient, one all-gather of the updated partitions (no bucketing: each is one message of the whole
        vector), and the floating buffers' broadcast; each rank keeps 1/p of the momentum."""
        k = setting.cluster.world_size
        comm = [api.Transfer("reduce_scatter", setting.model_bytes), api.Transfer("all_gather", setting.model_bytes)]
        buffers = setting.state_bytes - setting.model_bytes
        if buffers > 0:
            comm.append(api.Transfer("broadcast", buffers))
        facts = {
            "stage": params.stage,
            "modelled": "ZeRO-1/2 wire pattern on DDP's math; stages 1 and 2 send the same bytes here",
            "partitions": k,
            "partition_bytes": setting.model_bytes / k,
            "optimizer_state_bytes_per_rank": setting.model_bytes / k if params.momentum else 0.0,
            "buckets": "one: the whole flat gradient and parameter vector per collective (padded to p parts)",
            "gradient_average": "equal weights over ranks",
        }
        return api.MethodPlan(transfers=tuple(comm), facts=facts)

    def setup(self, ctx: api.WorkerContext) -> None:
        self.p = [q for q in ctx.model.parameters()]
        self.numel = sum(q.numel() for q in self.p)
        k = ctx.world_size
        self.part = math.ceil(self.numel / k)  # partition size; the flat vector is padded to k·part
        self.momentum_buf: torch.Tensor | None = None  # this rank's partition of the optimizer state
        self.buffers = api.float_buffers(ctx.model)

    def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None:
        p = self.params
        k = ctx.world_size
        ctx.forward_backward(batch)
        on = self.p[0].device  # the run's device (cpu unless the config says cuda)
        grads = torch.zeros(self.part * k, device=on)
        grads[: self.numel] = torch.cat([g.reshape(-1) for g in api.grads_of(ctx.model)])
        grad_part = torch.zeros(self.part, device=on)
        ctx.comm.reduce_scatter(grad_part, grads, op="mean")
        params = torch.zeros(self.part * k, device=on)
        params[: self.numel] = torch.cat([q.detach().reshape(-1) for q in self.p])
        mine = params[ctx.rank * self.part : (ctx.rank + 1) * self.part].clone()
        # torch.optim.SGD semantics on the partition: d = g + wd·w; buf = μ·buf + d; w -= lr·buf
        d = grad_part + p.weight_decay * mine if p.weight_decay else grad_part
        if p.momentum:
            if self.momentum_buf is None:
                self.momentum_buf = d.clone()
            else:
                self.momentum_buf.mul_(p.momentum).add_(d)
            d = self.momentum_buf
        mine.add_(d, alpha=-(ctx.lr if ctx.lr is not None else p.lr))  # the harness's schedule: no torch optimizer here
        ctx.comm.all_gather(params, mine)
        offset = 0
        with torch.no_grad():
            for q in self.p:
                n = q.numel()
                q.copy_(params[offset : offset + n].view_as(q))
                offset += n
        api.broadcast_buffers(ctx.comm, self.buffers)

    def state_dict(self) -> dict:
        out = super().state_dict()
        out["momentum_buf"] = ("value", None if self.momentum_buf is None else self.momentum_buf.tolist())
        return out

    def load_state_dict(self, state: dict) -> None:
        buf = state.pop("momentum_buf", ("value", None))[1]
        super().load_state_dict(state)
        self.momentum_buf = None if buf is None else torch.tensor(buf, device=self.p[0].device)
