"""Local SGD with a constant period H: local steps, then parameter averaging.

Each worker runs plain SGD on its own data; every ``period`` steps the replicas' parameters (and
floating buffers) are averaged with one ring all-reduce. Optimizer state (momentum) stays local,
as in Lin et al. (2020) and the QSR paper's Local SGD baseline. The optimizer is SGD unless
``optimizer:`` (here or in the run config) names another; its LR follows the harness's ``schedule:``.
A final averaging happens in ``finalize`` so the returned model is the consensus.
"""

from __future__ import annotations

from pydantic import Field

from distrepro import api


class Params(api.MethodParams):
    lr: api.PeakLR = 0.05
    momentum: api.Momentum = 0.9
    weight_decay: api.WeightDecay = 0.0
    period: int = Field(default=4, ge=1)
    #: another optimizer (fields left out are taken from lr/momentum/weight_decay above)
    optimizer: api.OptimizerConfig | None = None


class Method(api.Method[Params]):
    name = "local_sgd"
    synchronous = True
    smoke_params = Params(period=3)  # the generated tests' 10 steps: three averaging rounds and a cut last one
    accepts_optimizer = True

    @classmethod
    def plan(cls, params: Params, setting: api.PlanSetting) -> api.MethodPlan | None:
        """Every round's H in order: ``period`` steps each, the last one cut by the budget and closed by
        ``finalize``; ``rounds`` is the number of averagings (one all-reduce of the state each)."""
        total = setting.total_steps
        average = (api.Transfer("all_reduce", setting.state_bytes, per="round"),)
        if total is None:
            facts = {"period": params.period, "rounds_known": "not before the run (emulated_seconds budget)"}
            return api.MethodPlan(transfers=average, facts=facts)
        lengths = [params.period] * (total // params.period) + (
            [total % params.period] if total % params.period else []
        )
        return api.MethodPlan(transfers=average, round_lengths=tuple(lengths), facts={"period": params.period})

    def setup(self, ctx: api.WorkerContext) -> None:
        p = self.params
        if p.period < 1:
            raise ValueError("period must be >= 1")
        self.opt = ctx.build_optimizer(ctx.model.parameters(), api.method_optimizer(p))
        self.local_steps = 0

    def _average(self, ctx: api.WorkerContext) -> None:
        ctx.comm.all_reduce_coalesced(api.state_tensors(ctx.model), op="mean")
        self.local_steps = 0

    def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None:
        p = self.params
        ctx.forward_backward(batch)
        self.opt.step()
        self.local_steps += 1
        ctx.record("sync_period", p.period)
        if self.local_steps >= p.period:
            self._average(ctx)

    def finalize(self, ctx: api.WorkerContext) -> None:
        if self.local_steps:
            self._average(ctx)
