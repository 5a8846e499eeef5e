"""Chao, Liao, Gao (arXiv 2111.08272): task allocation for Ring-AllReduce training on uneven hardware.

One plugin, three modes, so that the baseline and both methods share every other choice
(optimizer, averaging, rounding) and a measured difference can only come from the split:

* ``equal``: every worker gets the same share and the same per-iteration batch ``B/n``, the
  default of data-parallel training that the paper starts from;
* ``static``: shares fixed before training, proportional to given ratios (``speeds``) or to the
  profile's declared speeds ("artificially allocated", "drawn proportionally");
* ``adaptive``: every epoch each worker's own compute throughput (waiting excluded) is
  all-gathered by the harness and every worker computes the same damped re-split towards it
  ("each machine finds the data it needs").

The global batch B and the number of iterations per epoch are the same in every mode, so the
optimisation problem is unchanged; the lockstep ring all-reduce makes every iteration as slow
as its slowest worker, which proportional batches equalise. Gradients are averaged weighted by
batch size (the exact gradient of the global-batch mean loss) unless ``unweighted`` is set.
"""

from __future__ import annotations

from typing import Any, Literal

import torch
from pydantic import Field

from distrepro import api

from . import allocation as rules


class Params(api.MethodParams):
    mode: Literal["equal", "static", "adaptive"] = "adaptive"
    lr: api.PeakLR = 0.05
    momentum: api.Momentum = 0.9
    weight_decay: api.WeightDecay = 0.0
    #: True: plain mean of the workers' gradients (DDP's division by world size) instead of
    #: the exact sample-weighted mean; the paper does not say which it used
    unweighted: bool = False
    #: global batch B; default: the sum of the configured per-rank batch sizes
    global_batch: int | None = Field(default=None, gt=0)
    #: static mode: the user's ratios ("artificially allocated"); default: declared speeds
    speeds: list[api.PositiveFloat] | None = Field(default=None, min_length=1)
    #: adaptive mode: weight α of the new measurement in (1-α)·p + α·p_new
    damping: float = Field(default=0.5, gt=0, le=1)
    #: adaptive mode: the split before anything is measured
    init: Literal["equal", "declared"] = "equal"
    min_batch: int = Field(default=1, ge=1)
    #: DDP-style overlap of the gradient all-reduce with backward (25 MB buckets, distrepro/api/overlap.py)
    overlap: bool = True


def _initial(p: Params, cluster: api.ClusterView) -> tuple[float, ...]:
    if p.mode == "static" and p.speeds is not None:
        if len(p.speeds) != cluster.world_size:
            raise ValueError(f"speeds has {len(p.speeds)} entries for {cluster.world_size} workers")
        return rules.normalise(p.speeds)
    if p.mode == "static" or (p.mode == "adaptive" and p.init == "declared"):
        return rules.normalise([d.declared_samples_per_s for d in cluster.devices])
    return rules.normalise([1.0] * cluster.world_size)


class Method(api.Method[Params]):
    name = "chao_alloc"
    synchronous = True

    @classmethod
    def allocate(cls, params: Params, cluster: api.ClusterView) -> api.Allocation:
        """Shares = per-iteration batch / B, so every worker's shard lasts the same iterations.

        Pure in its inputs: the previous split comes from ``cluster.current``, the speeds from
        ``cluster.measured_samples_per_s`` (identical on every rank after the all-gather).
        """
        p = params
        total = p.global_batch or sum(cluster.batch_sizes)
        fractions = _initial(p, cluster)
        if p.mode == "adaptive" and cluster.current is not None:
            fractions = rules.adaptive_fractions(cluster.current.shares, cluster.measured_samples_per_s, p.damping)
        batches = rules.round_batches(fractions, total, p.min_batch)
        return api.Allocation(tuple(b / total for b in batches), batches)

    @classmethod
    def plan(cls, params: Params, setting: api.PlanSetting) -> api.MethodPlan | None:
        """The epoch-0 split (ratios and per-iteration batches), how it will change, the split the adaptive
        rule tends to (throughput-proportional, from declared speeds here) and the best iteration-time
        ratio without communication; per step one gradient all-reduce and, with floating buffers, their
        broadcast from rank 0."""
        p, cluster, alloc = params, setting.cluster, setting.allocation
        declared = [d.declared_samples_per_s for d in cluster.devices]
        out: dict[str, Any] = {
            "mode": p.mode,
            "global_batch": sum(alloc.batch_sizes),
            "ratios": list(_initial(p, cluster)),
            "batch_sizes": list(alloc.batch_sizes),
            "ideal_time_ratio": rules.ideal_time_ratio(declared),
            "gradient_average": "equal weights" if p.unweighted else "weighted by batch size",
            "overlap": p.overlap,
        }
        if p.mode == "adaptive":
            target = rules.round_batches(rules.normalise(declared), sum(alloc.batch_sizes), p.min_batch)
            out |= {"init": p.init, "damping": p.damping, "resplit": "every epoch, towards measured throughput"}
            out["declared_fixed_point_batch_sizes"] = list(target)
        comm = [api.Transfer("all_reduce", setting.model_bytes)]
        if setting.state_bytes > setting.model_bytes:
            comm.append(api.Transfer("broadcast", setting.state_bytes - setting.model_bytes))
        return api.MethodPlan(transfers=tuple(comm), facts=out)

    def setup(self, ctx: api.WorkerContext) -> None:
        p = self.params
        self.opt = ctx.register_optimizer(api.sgd(ctx.model, p.lr, p.momentum, p.weight_decay))
        self.buffers = api.float_buffers(ctx.model)

    def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None:
        p = self.params
        if p.overlap:
            api.all_reduce_overlapped(ctx, batch, "equal" if p.unweighted else "samples")
        else:
            ctx.forward_backward(batch)
            grads = api.grads_of(ctx.model)
            if p.unweighted:
                ctx.comm.all_reduce_coalesced(grads, op="mean")
            else:
                ctx.comm.weighted_average(grads, weight=len(batch))
        self.opt.step()
        if self.buffers:  # BatchNorm statistics follow rank 0, as DDP's broadcast_buffers
            flat = torch.cat([b.reshape(-1) for b in self.buffers])
            ctx.comm.broadcast(flat, src=0)
            offset = 0
            for b in self.buffers:
                b.copy_(flat[offset : offset + b.numel()].view_as(b))
                offset += b.numel()
