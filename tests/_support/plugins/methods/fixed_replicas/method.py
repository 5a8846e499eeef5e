"""Test-only asynchronous method whose replicas differ by rank and never change.

``setup`` shifts every parameter of rank r by ``r * shift``; ``train_step`` computes a gradient
(charged, so clocks and budgets advance) but applies no update and talks to nobody. Every
evaluation, at whatever point and on whatever engine, must therefore score the same model: the
average of the shifted replicas (``evaluated_on``: the average, the default). Each rank also records its rank, so
the aggregation of ``ctx.record`` is visible (mean and per rank).
"""

from __future__ import annotations

import torch

from distrepro import api


class Params(api.MethodParams):
    shift: float = 0.05


class Method(api.Method[Params]):
    name = "fixed_replicas"
    synchronous = False

    def setup(self, ctx: api.WorkerContext) -> None:
        p = self.params
        with torch.no_grad():
            for q in ctx.model.parameters():
                q.add_(ctx.rank * p.shift)

    def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None:
        ctx.forward_backward(batch)
        ctx.record("rank", ctx.rank)
