"""AR-SGD: synchronous data parallelism with a gradient all-reduce every step (DDP semantics).

Every worker computes a gradient on its own batch, the gradients are averaged with one ring
all-reduce of the whole flat bucket, and every replica applies the same SGD step, so replicas
stay identical. With ``weighting: equal`` the average is the plain mean over workers, as
PyTorch DDP computes it whatever the local batch sizes; with ``weighting: samples`` (default)
it is weighted by local batch size, i.e. the exact gradient of the mean loss over the global
batch when batches differ. Floating buffers (BatchNorm statistics) are broadcast from rank 0
every step, as DDP's ``broadcast_buffers=True`` does. The optimizer is SGD from ``lr``/``momentum``/
``weight_decay``/``nesterov`` unless ``optimizer:`` (here or in the run config) names another, e.g.
AdamW for QSR's "Parallel AdamW" or Adam for Decent-DP's "All-Reduce Adam"; its LR follows the
harness's ``schedule:``.

``devices: gpu`` is DDP on the GPUs alone (the trivial baseline a heterogeneous method must beat: leave the
slow devices out): the allocation gives every non-GPU rank no data, those ranks join no collective and idle, and
the gradient all-reduce and buffer broadcast run over a group of the GPU ranks. Rank 0 must be a GPU: its
replica is the one evaluated (the idle replicas never move), and the consensus distance is over the GPU
replicas alone.
"""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from distrepro import api


class Params(api.MethodParams):
    lr: api.PeakLR = 0.05
    momentum: api.Momentum = 0.9
    weight_decay: api.WeightDecay = 0.0
    nesterov: bool = False
    weighting: Literal["samples", "equal"] = "samples"
    #: another optimizer (fields left out are taken from lr/momentum/weight_decay/nesterov above)
    optimizer: api.OptimizerConfig | None = None
    #: DDP-style overlap: 25 MB gradient buckets, reverse parameter order, all-reduced as backward makes
    #: them (distrepro/api/overlap.py); the step costs max(compute, last bucket's end). False: one bucket after backward
    overlap: bool = True
    #: which devices train: all of them (DDP across the cluster), or only the GPUs (the others idle)
    devices: Literal["all", "gpu"] = "all"

    @model_validator(mode="after")
    def _nesterov_needs_momentum(self) -> Params:
        if self.nesterov and self.momentum == 0:  # torch.optim.SGD refuses it, but only inside a worker
            raise ValueError("nesterov: true needs momentum > 0")
        return self


class Method(api.Method[Params]):
    name = "ar_sgd"
    synchronous = True
    accepts_optimizer = True

    @classmethod
    def allocate(cls, params: Params, cluster: api.ClusterView) -> api.Allocation:
        """All devices: equal shares, configured batches. GPUs only: equal shares over the GPUs, none elsewhere."""
        if params.devices == "all":
            return api.Allocation.equal(cluster.world_size, cluster.batch_sizes)
        members = _gpus([d.kind for d in cluster.devices])
        share = [1.0 / len(members) if r in members else 0.0 for r in range(cluster.world_size)]
        batches = [b if r in members else 0 for r, b in enumerate(cluster.batch_sizes)]
        return api.Allocation(tuple(share), tuple(batches))

    @classmethod
    def evaluated_on(cls, params: Params) -> Literal["average", "rank0"]:
        return "rank0" if params.devices == "gpu" else "average"

    @classmethod
    def trained_ranks(cls, params: Params, device_kinds: tuple[str, ...]) -> tuple[int, ...] | None:
        """GPUs only: the GPU ranks (their replicas stay identical, so the consensus distance is 0)."""
        return _gpus(list(device_kinds)) if params.devices == "gpu" else None

    def setup(self, ctx: api.WorkerContext) -> None:
        p = self.params
        self.opt = ctx.build_optimizer(ctx.model.parameters(), api.method_optimizer(p))
        self.buffers = api.float_buffers(ctx.model)
        self.group: api.Group | None = None
        self.member = True
        if p.devices == "gpu":
            members = _gpus(list(ctx.cluster.device_kinds))
            self.member = ctx.rank in members
            if len(members) < ctx.world_size:  # every rank creates the group, as torch.distributed needs
                self.group = ctx.comm.new_group(members)

    def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None:
        p = self.params
        if not self.member:  # an idle device: no data, no collective
            return
        if p.overlap:
            api.all_reduce_overlapped(ctx, batch, p.weighting, self.group)
        else:
            ctx.forward_backward(batch)
            grads = api.grads_of(ctx.model)
            if p.weighting == "samples":
                ctx.comm.weighted_average(grads, weight=len(batch), group=self.group)
            else:
                ctx.comm.all_reduce_coalesced(grads, op="mean", group=self.group)
        self.opt.step()
        api.broadcast_buffers(ctx.comm, self.buffers, group=self.group)

    @classmethod
    def plan(cls, params: Params, setting: api.PlanSetting) -> api.MethodPlan | None:
        """One ring all-reduce of the gradients (the model's bytes) per step; the buffer broadcast is left out."""
        return api.MethodPlan(transfers=(api.Transfer("all_reduce", setting.model_bytes),))


def _gpus(kinds: list[str]) -> tuple[int, ...]:
    """The GPU ranks, for ``devices: gpu``; rank 0 must be one (its replica is evaluated)."""
    members = tuple(r for r, kind in enumerate(kinds) if kind == "gpu")
    if not members or members[0] != 0:
        raise ValueError("ar_sgd: devices: gpu needs GPUs in the profile, rank 0 among them (its replica is evaluated)")
    return members
