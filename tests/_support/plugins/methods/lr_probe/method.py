"""Test-only method: AR-SGD recording the LR its optimizer steps with, ``ctx.lr`` and ``ctx.total_steps``."""

from __future__ import annotations

from distrepro import api


class Params(api.MethodParams):
    lr: api.PeakLR = 0.1
    optimizer: api.OptimizerConfig | None = None


class Method(api.Method[Params]):
    name = "lr_probe"
    accepts_optimizer = True

    def setup(self, ctx: api.WorkerContext) -> None:
        self.opt = ctx.build_optimizer(ctx.model.parameters(), api.method_optimizer(self.params))

    def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None:
        ctx.forward_backward(batch)
        ctx.comm.all_reduce_coalesced(api.grads_of(ctx.model), op="mean")
        ctx.record("lr_used", self.opt.param_groups[0]["lr"])  # what step() below applies
        ctx.record("ctx_lr", ctx.lr if ctx.lr is not None else float("nan"))
        ctx.record("total_steps", ctx.total_steps if ctx.total_steps is not None else -1)
        self.opt.step()
