"""Test-only method: AR-SGD that fails on purpose on one rank at one step (kill, hang or raise)."""

from __future__ import annotations

import os
import signal
import time
from typing import Literal

from distrepro import api


class Params(api.MethodParams):
    lr: api.PeakLR = 0.05
    fail_rank: int = 1
    fail_step: int = 2
    mode: Literal["kill", "hang", "raise", "none"] = "kill"
    once_file: str | None = None  # if set, fail only while this file does not exist (then create it)


class Method(api.Method[Params]):
    name = "faulty"
    accepts_optimizer = True  # the run config's optimizer: (resume tests of AdamW/AccumAdam state)

    def setup(self, ctx: api.WorkerContext) -> None:
        self.opt = ctx.build_optimizer(ctx.model.parameters(), api.OptimizerConfig(lr=self.params.lr))

    @staticmethod
    def _arm(once_file: str | None) -> bool:
        if once_file is None:
            return True
        if os.path.exists(once_file):
            return False
        open(once_file, "w").close()
        return True

    def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None:
        p = self.params
        if ctx.rank == p.fail_rank and ctx.train_state["step"] == p.fail_step and self._arm(p.once_file):
            if p.mode == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            elif p.mode == "hang":
                time.sleep(3600)
            elif p.mode == "raise":
                raise RuntimeError("injected failure")
        ctx.forward_backward(batch)
        ctx.comm.all_reduce_coalesced(api.grads_of(ctx.model), op="mean")
        self.opt.step()
