"""Local OPT with a period set per round: QSR (Gu et al., ICLR 2024), the H ~ 1/lr rule, constant H, post-local.

Each worker runs its optimizer (SGD with momentum, or ``optimizer:`` such as AdamW) on its own data for
``H`` steps, then the replicas' parameters are averaged with one ring all-reduce; the optimizer state
(momentum, Adam's moments and step count) stays per worker, as in every script of the reference code.
``H`` is decided at the first step of each round from the LR the harness's ``schedule:`` set for that
step (``rule.py``): ``max(h_base, floor((alpha/lr)**gamma))`` after the warm-up, ``h_base`` during it,
cut by the end of the run. ``alpha: 0`` is Local OPT with a constant ``H = h_base``; ``gamma: 1`` is the
linear rule; ``post_local_switch`` runs ``H = 1`` for that fraction of the steps first (post-local SGD).
Parallel OPT is the ``ar_sgd`` method with the same ``optimizer:``. A final averaging in ``finalize``
closes a round the budget cut, so the returned model is the consensus.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from distrepro import api

from .rule import SyncRule, first_growth, round_lengths, run_length


class Params(api.MethodParams):
    lr: api.PeakLR = 0.05
    momentum: api.Momentum = 0.9
    weight_decay: api.WeightDecay = 0.0
    nesterov: bool = False
    #: H_base: the period during warm-up and the floor of the rule
    h_base: int = Field(default=2, ge=1)
    #: QSR's alpha (beta for the linear rule); 0 keeps H = h_base throughout (Local OPT, constant H)
    alpha: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    #: exponent of the rule: 2 is QSR, 1 the H ~ 1/lr rule, others the paper's ablation
    gamma: float = Field(default=2.0, gt=0, allow_inf_nan=False)
    #: post-local SGD: the fraction of the run's steps done with H = 1 before the rule applies
    post_local_switch: float = Field(default=0.0, ge=0, lt=1)
    #: another optimizer (fields left out are taken from lr/momentum/weight_decay/nesterov above)
    optimizer: api.OptimizerConfig | None = None


def sync_rule(params: Params, schedule: api.LRSchedule | None, total_steps: int | None) -> SyncRule:
    """The rule of a run: ``params`` with the warm-up of its bound ``schedule`` and its switch step."""
    warmup = schedule.warmup_steps if schedule is not None else 0
    switch = round(params.post_local_switch * total_steps) if total_steps else 0
    return SyncRule(params.h_base, params.alpha, params.gamma, warmup, switch)


class Method(api.Method[Params]):
    synchronous = True
    accepts_optimizer = True
    #: the generated tests' 10 steps: H grows from h_base = 2 to max(2, (0.1 / lr)^2) = 4 at the constant lr 0.05
    smoke_params = Params(alpha=0.1)

    @classmethod
    def plan(cls, params: Params, setting: api.PlanSetting) -> api.MethodPlan | None:
        """Every round's H in order (``round_lengths``; ``schedule`` is the same, run-length encoded), the
        number of rounds (averagings, one all-reduce of the state each) and its share of the steps."""
        total, sched = setting.total_steps, setting.lr_schedule
        rule = sync_rule(params, sched, total)
        head: dict[str, Any] = {"h_base": params.h_base, "alpha": params.alpha, "gamma": params.gamma}
        if params.post_local_switch:
            head["switch_step"] = rule.switch_step
        average = (api.Transfer("all_reduce", setting.state_bytes, per="round"),)
        if total is None:
            head["rounds_known"] = "not before the run (emulated_seconds budget)"
            return api.MethodPlan(transfers=average, facts=head)
        lengths = round_lengths(rule, (lambda t: sched.lr(t)) if sched is not None else (lambda t: None), total)
        facts = head | {
            "warmup_steps": rule.warmup_steps,
            "comm_fraction": len(lengths) / total,
            "first_growth_step": first_growth(rule, lengths),
            "last_round": lengths[-1],
            "schedule": run_length(lengths),
        }
        return api.MethodPlan(transfers=average, round_lengths=tuple(lengths), facts=facts)

    def setup(self, ctx: api.WorkerContext) -> None:
        self.opt = ctx.build_optimizer(ctx.model.parameters(), api.method_optimizer(self.params))
        self.rule = sync_rule(self.params, ctx.lr_schedule, ctx.total_steps)
        self.local_steps = 0
        self.period = 0  # the current round's H, decided at its first step
        self.rounds = 0  # averagings done (plain attributes: the default checkpoint state keeps these)
        self.max_ratio = 0.0  # longest round so far over H_base (regime: H grows past 10 x H_base)
        self.grown_steps = 0  # steps in rounds longer than H_base (regime: share in the small-LR phase)

    def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None:
        if self.local_steps == 0:  # first step of a round: the harness has just set this step's LR
            step = int(ctx.train_state["step"])
            self.period = self.rule.period(step, ctx.lr, ctx.total_steps, first=self.rounds == 0 and step == 0)
        ctx.forward_backward(batch)
        self.opt.step()
        self.local_steps += 1
        ctx.record("sync_period", self.period)
        self._record_regime(ctx)
        if self.local_steps >= self.period:
            self._average(ctx)

    def _record_regime(self, ctx: api.WorkerContext) -> None:
        """What the claims' regime conditions read (methods/qsr/paper.yaml): the largest H / H_base so far
        (the budget's last, truncated round counts at its planned length, as the rule capped it) and the
        share of all steps spent in rounds longer than H_base, QSR's small-LR phase."""
        grown = self.period > self.rule.h_base and int(ctx.train_state["step"]) >= self.rule.switch_step
        self.grown_steps += int(grown)
        self.max_ratio = max(self.max_ratio, self.period / self.rule.h_base)
        ctx.record("max_period_ratio", self.max_ratio)
        ctx.record("grown_share", self.grown_steps / ctx.total_steps if ctx.total_steps else 0.0)

    def _average(self, ctx: api.WorkerContext) -> None:
        ctx.comm.all_reduce_coalesced(api.state_tensors(ctx.model), op="mean")
        self.local_steps = 0
        self.rounds += 1
        ctx.record("rounds", self.rounds)

    def finalize(self, ctx: api.WorkerContext) -> None:
        if self.local_steps:
            self._average(ctx)
