"""TEMPLATE: a new method plugin. Copy this folder to ``<root>/methods/<your_name>/`` and edit.

Start here (``docs/writing-a-method.md`` walks through it): this file is a complete, working method,
synchronous data parallelism with a sample-weighted gradient average every step, so the copy runs
before you change anything. Replace ``train_step`` (and ``allocate`` if your method decides who gets
which data) with your algorithm. The harness owns the data, model, loss, evaluation, budget, clock
and logging; the method owns only allocation, local optimisation and communication, and talks to the
other workers only through ``ctx.comm`` (so every byte is charged).

Helpers of your own go in sibling files of this folder, imported package-relative:
``from . import helpers`` (a test reaches them with ``distrepro.plugins.registry.plugin_module("<name>", "helpers")``).
"""

from __future__ import annotations

from distrepro import api


class Params(api.MethodParams):
    """Hyperparameters, validated from the run config's ``method_params``; defaults are the paper's values.

    Unknown keys are errors. Constrain what must hold (``api.Momentum``, ``Field(gt=0)``) so a bad config fails
    before training.
    """

    #: the peak LR, declared (any name: ``inner_lr: api.PeakLR``): the run config's ``schedule:`` scales from it,
    #: ``ctx.lr`` follows it and the ``lr`` metric logs it
    lr: api.PeakLR = 0.05
    momentum: api.Momentum = 0.9


class Method(api.Method[Params]):  # the one place Params is named; the short name is the folder's
    synchronous = True  # every worker does the same number of steps; False for asynchronous methods
    #: the params the generated tests run (10 smoke steps): make periodic logic (a sync every H steps) happen
    smoke_params = Params()

    @classmethod
    def allocate(cls, params: Params, cluster: api.ClusterView) -> api.Allocation:
        """Who trains on how much data, at which batch size. Pure: every rank must compute the same."""
        return api.Allocation.proportional_to_batch(cluster.batch_sizes)

    @classmethod
    def plan(cls, params: Params, setting: api.PlanSetting) -> api.MethodPlan | None:
        """What a run sends, said before it runs (``distrepro plan`` prices it): per step, one all-reduce of the
        gradients (the model's bytes) and one broadcast of the floating buffers. Pure: no ``ctx`` here."""
        sends = [api.Transfer("all_reduce", setting.model_bytes)]
        if setting.state_bytes > setting.model_bytes:
            sends.append(api.Transfer("broadcast", setting.state_bytes - setting.model_bytes))
        return api.MethodPlan(transfers=tuple(sends))

    def setup(self, ctx: api.WorkerContext) -> None:
        """Per-worker state, created once before training (not timed)."""
        # registered: the harness sets its LR from the run config's schedule: before every step
        self.opt = ctx.register_optimizer(api.sgd(ctx.model, self.params.lr, self.params.momentum, 0.0))
        self.buffers = api.float_buffers(ctx.model)

    def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None:
        """One local step (timed): compute through ``ctx``, communicate through ``ctx.comm``, update."""
        loss = ctx.forward_backward(batch)  # charged to this worker's clock
        ctx.comm.weighted_average(api.grads_of(ctx.model), weight=len(batch))  # charged as a ring all-reduce
        self.opt.step()
        api.broadcast_buffers(ctx.comm, self.buffers)  # BatchNorm statistics follow rank 0
        ctx.record("local_loss", loss)  # any scalar of your own, logged per step
