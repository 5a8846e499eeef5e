"""Test-only method: records what the harness shows a method, and trains without communicating.

Used by ``tests/engine/test_engine.py``: every ``train_step`` appends ``(rank, dict(train_state))`` to
``Method.seen`` (the test resets it) and then takes a plain local SGD step, so replicas drift
apart and the averaged model differs from rank 0's.
"""

from __future__ import annotations

from typing import Any, ClassVar

from distrepro import api


class Params(api.MethodParams):
    lr: api.PeakLR = 0.1


class Method(api.Method[Params]):
    name = "probe_state"
    synchronous = True
    seen: ClassVar[list[tuple[int, dict[str, Any]]]] = []

    def setup(self, ctx: api.WorkerContext) -> None:
        p = self.params
        self.opt = api.sgd(ctx.model, p.lr, 0.0, 0.0)

    def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None:
        type(self).seen.append((ctx.rank, dict(ctx.train_state)))
        ctx.forward_backward(batch)
        self.opt.step()
