"""Decent-DP (Wang et al., "From Promise to Practice", ICLR 2025): decentralized Adam / AccumAdam(W) with
bucketed overlap of the parameter exchange on time-varying topologies.

What the library's ``DecentralizedDataParallel`` (PyPI ``decent-dp`` 0.2.3, ``decent_dp/ddp.py``) does, per
rank, restated on the harness's communicator so every byte and every overlap is charged by the clock:

* iteration 1 computes a gradient and nothing else; at the start of iteration 2 each bucket takes its first
  optimizer step with those gradients and runs its first exchange, *blocking* (the library waits on it);
* from iteration 2 on, when bucket ``b``'s gradients are ready in backward: wait for ``b``'s exchange launched
  one iteration ago, replace ``x_b`` by the group average received (``x_b <- c_self x_b + comm_b`` with
  ``c_self = w - (1-w)/(m-1) = 0`` for the uniform weights ``w = 1/m`` of every built-in topology), take the
  bucket's local optimizer step with the gradient computed at the *un-mixed* iterate (adapt-while-combine),
  then launch a non-blocking all-reduce over the next round's group of ``x_b * (1-w)/(m-1)``. Each exchange
  thus has a whole iteration (the rest of this backward, the next forward and backward) to hide under.
* one optimizer per bucket (the library builds them with ``optim_fn`` per bucket); Adam-family steps are
  element-wise, so only the timing depends on where buckets are cut. Buckets are the harness's 25 MB DDP
  buckets in reverse parameter order (:mod:`distrepro.api.overlap`), the library's default ``bucket_size_in_mb=25``
  and its "close a bucket once it reaches the size" rule over the backward order: the emulated model's buckets
  when the run emulates a workload, each exchanged (and charged) as itself even where it holds none of the proxy's
  parameters (an empty exchange, no optimizer).

``overlap: false`` waits for every exchange at the end of its iteration instead (same parameters, time =
compute + communication): the "overlap" ablation of the paper's key factors.

Every rank creates every group of every round in :meth:`Method.setup`, in round order, as the library's
``Topology._create_edges`` does: ``Comm.new_group`` must be called by every rank in the same order (under
``torch.distributed`` a group's name is a per-process counter). A checkpoint (:meth:`Method.state_dict`) drains
the exchanges in flight: it waits for them and saves the sums received, which the next iteration's hooks mix in
as they would have (README, "Checkpoints").
"""

from __future__ import annotations

from typing import Any, Literal

import torch

from distrepro import api

from . import topology as topo


def _default_optimizer() -> api.OptimizerConfig:
    # the Transformer recipe's AccumAdam: lr 7e-4, betas (0.9, 0.999), eps 1e-9, accum_iter 4 (README)
    return api.OptimizerConfig(name="accum_adam", lr=7e-4, betas=(0.9, 0.999), eps=1e-9, accum_iter=4)


class Params(api.MethodParams):
    topology: Literal["complete", "ring", "one-peer-exp", "alternating-exp-ring"] = "alternating-exp-ring"
    #: the local optimizer: ``adam`` = DAdam, ``accum_adam``/``accum_adamw`` = AccumAdam(W)
    optimizer: api.OptimizerConfig = _default_optimizer()
    #: the library's bucketed overlap (True) or blocking exchange at the end of each iteration (False)
    overlap: bool = True
    #: ranks per node for the alternating exponential ring; None: from the profile (``ctx.cluster``)
    local_world_size: int | None = None


class Method(api.Method[Params]):
    synchronous = True
    exchange = "neighbour"  # each iteration averages with the topology's neighbours (AER: alternating rings)
    # each bucket's optimizer steps inside backward; under AMP its GradScaler reads the overflow flag back per bucket
    # (decent-dp 0.2.3, ddp.py ``_ddp_fn``), so the host waits for the GPU once a bucket
    host_syncs = "per_bucket"
    accepts_optimizer = True
    reference_check = (
        "tests/methods/test_decentdp_equivalence.py against the decent-dp package 0.2.3 (topologies, AccumAdam(W), "
        "DecentralizedDataParallel end to end)"
    )

    def skip(self, cluster: api.ClusterLayout) -> str | None:
        """The topology on this world size; the alternating exponential ring's node count comes from the layout
        (two or more nodes, a power of two) unless ``local_world_size`` fixes it, and it needs two or more ranks
        per node: with one, its intra-node rounds are single-rank groups, whose mixing weight
        ``(1 - 1/m) / (m - 1)`` is undefined (the reproduced runs have 4 or 8 per node)."""
        local = self.params.local_world_size
        try:
            if self.params.topology == "alternating-exp-ring" and not local:
                local = _ranks_per_node(cluster)
            topo.rounds(self.params.topology, cluster.world_size, local or 1)
        except ValueError as exc:
            return str(exc)
        if self.params.topology == "alternating-exp-ring" and local == 1:
            return "the alternating exponential ring needs two or more ranks per node (one leaves single-rank groups)"
        return None

    def setup(self, ctx: api.WorkerContext) -> None:
        local = self.params.local_world_size or _ranks_per_node(ctx.cluster)
        self.rounds = topo.rounds(self.params.topology, ctx.world_size, local)
        # every group of every round, on every rank, in the same order (the library's ``_create_edges``): a rank
        # creating only its own groups, when it first needs them, gives two groups one torch.distributed name
        self.groups: dict[tuple[int, ...], api.Group] = {}
        for ranks in dict.fromkeys(g for rnd in self.rounds for g in rnd):
            group = ctx.comm.new_group(ranks)
            if ctx.rank in ranks:
                self.groups[ranks] = group
        self.ctx = ctx  # load_state_dict rebuilds the buckets (saved as positions in its model) and their optimizers
        self.iteration = 0
        self.buckets: list[list[torch.nn.Parameter]] = []
        #: per bucket, its parameters' one flat buffer (they are views of it, api.flat_parameters): the exchange
        #: reads and the mixing writes it whole, with no copy to a flat vector and back
        self.flats: list[torch.Tensor] = []
        #: per bucket, its optimizer; None for an emulated bucket that holds none of the proxy's parameters
        self.optims: list[torch.optim.Optimizer | None] = []
        #: per bucket, the exchange to mix in at its next hook: its handle (None once waited) and its buffer
        self.pending: list[tuple[api.Work | None, torch.Tensor] | None] = []
        self.finished = False

    # ------------------------------------------------------------------ helpers

    def _group(self, ctx: api.WorkerContext, step: int) -> tuple[tuple[int, ...], api.Group]:
        ranks = topo.group_of(self.rounds[step % len(self.rounds)], ctx.rank)
        return ranks, self.groups[ranks]

    def _launch(self, ctx: api.WorkerContext, b: int, step: int) -> api.Work:
        """Send bucket ``b``, pre-scaled by ``(1-w)/(m-1)``, into a sum over the group of round ``step``."""
        ranks, group = self._group(ctx, step)
        m = len(ranks)
        weight = 1.0 / m
        with torch.no_grad():
            flat = torch.mul(self.flats[b], (1 - weight) / (m - 1))  # a copy: the parameters move on meanwhile
        work = ctx.comm.all_reduce(flat, op="sum", group=group, async_op=True)
        assert work is not None
        self.pending[b] = (work, flat)
        return work

    def _mix(self, ctx: api.WorkerContext, b: int, step: int) -> None:
        """Wait for bucket ``b``'s exchange and replace its parameters by ``c_self x + received``; ``c_self`` is
        read from the round of the *current* iteration, as the library reads ``get_edge(self._step)``."""
        entry = self.pending[b]
        if entry is None:
            return
        work, flat = entry
        if work is not None:
            work.wait()
        self.pending[b] = None
        m = len(topo.group_of(self.rounds[step % len(self.rounds)], ctx.rank))
        weight = 1.0 / m
        c_self = weight - (1 - weight) / (m - 1)
        with torch.no_grad():
            self.flats[b].mul_(c_self).add_(flat)

    def _build_optimizers(self, ctx: api.WorkerContext) -> None:
        self.flats = [api.flat_parameters(params) for params in self.buckets]
        for params in self.buckets:
            if not params:  # an emulated bucket the proxy has no tensor in: exchanged (charged), nothing to step
                self.optims.append(None)
                continue
            opt = ctx.build_optimizer(params, self.params.optimizer)
            if ctx.lr is not None:  # registered after the harness set this step's LR
                api.set_lr(opt, ctx.lr)
            self.optims.append(opt)
        self.pending = [None] * len(self.buckets)

    # ------------------------------------------------------------------ checkpoints

    def state_dict(self) -> dict[str, Any]:
        """The iteration counter (it picks the round and the first-iteration path), the bucket order (positions in
        ``model.parameters()``), each bucket's optimizer state (AccumAdam's moments and window) and, per bucket, the
        sum received by its last exchange. Exchanges still in flight are drained first (waited for, as the library's
        ``global_avg`` waits for them): the state holds none in flight, and the mixing stays at the next hook. After
        :meth:`finalize` nothing is waited for (the run is over, its last exchanges are never mixed in) and they are
        left out."""
        for b, entry in enumerate(self.pending):
            if entry is not None and entry[0] is not None and not self.finished:
                entry[0].wait()
                self.pending[b] = (None, entry[1])
        out = super().state_dict()  # the iteration and the rounds (plain values)
        position = {id(p): i for i, p in enumerate(self.ctx.model.parameters())}
        out["buckets"] = ("value", [[position[id(p)] for p in params] for params in self.buckets])
        out["optims"] = ("value", [None if opt is None else opt.state_dict() for opt in self.optims])
        received = [None if e is None or e[0] is not None else e[1].detach().clone() for e in self.pending]
        out["pending"] = ("value", received)
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` after :meth:`setup`: the buckets in their traced order, one optimizer per
        bucket with its state, and the drained exchanges' sums, mixed in at the buckets' next hooks."""
        state = dict(state)
        _, order = state.pop("buckets", ("value", []))
        _, optims = state.pop("optims", ("value", []))
        _, received = state.pop("pending", ("value", []))
        super().load_state_dict(state)
        params = list(self.ctx.model.parameters())
        self.buckets = [[params[i] for i in positions] for positions in order]
        self.optims = []
        if self.buckets:
            self._build_optimizers(self.ctx)
        for opt, saved in zip(self.optims, optims, strict=True):
            if opt is not None:
                opt.load_state_dict(saved)
        self.pending = [None if flat is None else (None, flat.to(params[0].device)) for flat in received]

    # ------------------------------------------------------------------ the step

    def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None:
        self.iteration += 1
        k = self.iteration
        # what the accuracy claims' regime conditions read: Adam's moments are refreshed every step by DAdam,
        # every accum_iter steps by AccumAdam (its window's mean gradient is folded in at the window's end)
        config = self.params.optimizer
        window = (config.accum_iter or 1) if config.name.startswith("accum_") else 1
        ctx.record("moment_refreshes", k // window)
        if k == 1:
            # iteration 1: trace the bucket order; then the first step and the first, blocking exchange
            def record(_i: int, params: list[torch.nn.Parameter]) -> None:
                self.buckets.append(list(params))

            ctx.forward_backward(batch, on_bucket=record)
            self._build_optimizers(ctx)
            for b, opt in enumerate(self.optims):
                if opt is not None:
                    opt.step()
                self._launch(ctx, b, topo.comm_round(1)).wait()
            return

        def on_bucket(b: int, _params: list[torch.nn.Parameter]) -> None:
            self._mix(ctx, b, k)
            opt = self.optims[b]
            if opt is not None:
                opt.step()
            work = self._launch(ctx, b, topo.comm_round(k))
            if not self.params.overlap:
                launched.append(work)

        launched: list[api.Work] = []
        ctx.forward_backward(batch, on_bucket=on_bucket)
        for work in launched:  # no overlap: the exchange is waited for before the next iteration starts
            work.wait()

    def finalize(self, ctx: api.WorkerContext) -> None:
        """Nothing to do: the exchanges launched in the last iteration stay unwaited, as in the library, whose last
        exchange is never mixed in either; a state taken from now on leaves them out (:meth:`state_dict`)."""
        self.finished = True

    @classmethod
    def plan(cls, params: Params, setting: api.PlanSetting) -> api.MethodPlan | None:
        """One group all-reduce of the parameters per step (the group's size varies with the round; priced on the
        world group, an upper bound)."""
        return api.MethodPlan(transfers=(api.Transfer("all_reduce", setting.model_bytes),))


def _ranks_per_node(cluster: api.ClusterLayout) -> int:
    sizes = set(cluster.ranks_per_node)
    if len(sizes) != 1:
        raise ValueError(f"Decent-DP's topologies need the same number of ranks on every node, not {sorted(sizes)}")
    return sizes.pop()
