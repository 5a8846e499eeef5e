"""AR-SGD: synchronous data parallelism with a gradient all-reduce every step (DDP semantics).

Every worker computes a gradient on its own batch, the gradients are averaged with one ring
all-reduce of the whole flat bucket, and every replica applies the same SGD step, so replicas
stay identical. With ``weighting: equal`` the average is the plain mean over workers, as
PyTorch DDP computes it whatever the local batch sizes; with ``weighting: samples`` (default)
it is weighted by local batch size, i.e. the exact gradient of the mean loss over the global
batch when batches differ. Floating buffers (BatchNorm statistics) are broadcast from rank 0
every step, as DDP's ``broadcast_buffers=True`` does. ``lr_decay_every_epochs`` applies a step
decay (the harness has no LR schedule), so a paper's schedule reaches the DDP arm too.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from suite import api
from suite.optim import broadcast_buffers, float_buffers, grads_of, sgd, step_decay
from suite.overlap import all_reduce_overlapped


class Params(api.MethodParams):
    lr: api.LearningRate = 0.05
    momentum: api.Momentum = 0.9
    weight_decay: api.WeightDecay = 0.0
    nesterov: bool = False
    weighting: Literal["samples", "equal"] = "samples"
    lr_decay_every_epochs: float | None = Field(default=None, gt=0)  # step decay (e.g. C-ADP's ×0.5 every 10)
    lr_decay_factor: float = Field(default=0.5, gt=0)
    #: DDP-style overlap: 25 MB gradient buckets, reverse parameter order, all-reduced as backward makes
    #: them (suite/overlap.py); the step costs max(compute, last bucket's end). False: one bucket after backward
    overlap: bool = True

    @model_validator(mode="after")
    def _nesterov_needs_momentum(self) -> Params:
        if self.nesterov and self.momentum == 0:  # torch.optim.SGD refuses it, but only inside a worker
            raise ValueError("nesterov: true needs momentum > 0")
        return self


class Method(api.Method[Params]):
    name = "ar_sgd"
    synchronous = True

    def setup(self, ctx: api.WorkerContext) -> None:
        p = self.params
        self.opt = sgd(ctx.model, p.lr, p.momentum, p.weight_decay, p.nesterov)
        self.buffers = float_buffers(ctx.model)

    def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None:
        p = self.params
        if p.lr_decay_every_epochs is not None:
            lr = step_decay(p.lr, float(ctx.train_state["epoch"]), p.lr_decay_every_epochs, p.lr_decay_factor)
            for group in self.opt.param_groups:
                group["lr"] = lr
        if p.overlap:
            all_reduce_overlapped(ctx, batch, p.weighting)
        else:
            ctx.forward_backward(batch)
            grads = grads_of(ctx.model)
            if p.weighting == "samples":
                ctx.comm.weighted_average(grads, weight=len(batch))
            else:
                ctx.comm.all_reduce_coalesced(grads, op="mean")
        self.opt.step()
        broadcast_buffers(ctx.comm, self.buffers)
