"""Test-only method: unequal data shares and batch sizes, changed at the first epoch boundary.

Used by ``tests/engine/test_engine.py`` (found with ``distrepro.plugins.registry.get_method(...,
root=tests/_support/plugins)``)
to check that the engine hands every worker exactly the share and batch size ``allocate`` asked
for, re-allocates at epoch boundaries and reports measured speeds. Training is sample-weighted
gradient averaging, as AR-SGD's.
"""

from __future__ import annotations

from typing import ClassVar

from distrepro import api

#: (shares, batch sizes) before the first epoch boundary; rank 3 gets no data at all
FIRST = api.Allocation((0.5, 0.25, 0.25, 0.0), (12, 6, 3, 5))
#: after it: equal shares, batch sizes reversed
LATER = api.Allocation((0.25, 0.25, 0.25, 0.25), (2, 4, 6, 8))


class Params(api.MethodParams):
    lr: api.PeakLR = 0.05


class Method(api.Method[Params]):
    name = "unequal_alloc"
    synchronous = True
    #: every ClusterView allocate() was called with, in order (the test resets it)
    seen: ClassVar[list[api.ClusterView]] = []

    @classmethod
    def allocate(cls, params: Params, cluster: api.ClusterView) -> api.Allocation:
        cls.seen.append(cluster)
        return FIRST if cluster.epoch == 0 else LATER

    def setup(self, ctx: api.WorkerContext) -> None:
        p = self.params
        self.opt = api.sgd(ctx.model, p.lr, 0.0, 0.0)

    def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None:
        ctx.forward_backward(batch)
        ctx.comm.weighted_average(api.grads_of(ctx.model), weight=len(batch))
        self.opt.step()
