"""Overlap of gradient communication with backward, as PyTorch DDP does it.

Why: charging a step as one compute block, then the whole all-reduce, made the DDP baseline pay
compute + all-reduce where real DDP pays about max(compute, last bucket's all-reduce): DDP all-reduces
gradient *buckets* (``bucket_cap_mb=25`` by default) on its own stream as soon as backward has produced
them, in reverse parameter order (Li et al., "PyTorch Distributed: Experiences on Accelerating Data
Parallel Training", VLDB 13(12), 2020, §3.2.3; ``torch.nn.parallel.DistributedDataParallel``
``bucket_cap_mb``). Charging no overlap favoured every method compared against DDP.

Model: backward is ``backward_fraction`` of the step's charged compute (the profile's ``backward``, else
2/3 from the 1:2 forward:backward FLOP ratio) and runs over the parameters from last to first at a rate
proportional to their element count; a bucket is ready when its last parameter's gradient is. Buckets are
cut from the *charged* gradient bytes (the emulated workload's, ``bytes_scale`` × the proxy's), so a
proxy model stands for as many buckets as the real one. The real backward has already run: only the
times are emulated, so the callbacks see final gradients.

With the emulated workload's per-layer table (:mod:`distrepro.hardware.layer_tables`), buckets and
their ready times are the *emulated model's*: DDP's assignment (``compute_bucket_assignment_by_size``: parameters
in reverse order, the first bucket capped at 1 MiB, ``dist._DEFAULT_FIRST_BUCKET_BYTES``, the others at 25 MiB)
runs over the table's layers, a bucket is ready when backward (2 × each layer's forward FLOPs, in reverse layer
order) has passed its last layer. A VGG-like model whose fully-connected layers hold most parameters but ~1 % of
the compute then has most of its gradient ready at the start of backward, as on the real GPU.

Every emulated bucket is charged as itself, whatever the proxy: the callback ``on_bucket(i, params)``
runs once per emulated bucket at its ready time, and a collective issued inside it is charged the bucket's bytes
(:class:`BucketCharge`, set on the comm by :func:`charged_as`). The proxy's parameters only carry the real
gradients: each goes to the emulated bucket whose share of the bytes covers the middle of its own share, so a
bucket may hold none of them (a proxy with fewer tensors than the emulated model has buckets) and is still
launched, and charged, at its own time. Before, an emulated bucket no proxy tensor fell into rode with the next
one: Decent-DP's Fig. 6 proxy (8 tensors) turned Transformer-base's 7 buckets into 3 charges. Outside a callback
a payload is charged as before, its real bytes times ``bytes_scale`` (Decent-DP's first, blocking exchange of each
bucket after iteration 1: the same bytes in all, split by the proxy's tensors).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from distrepro.api import method as api  # the contract (not the facade: this module is part of it)

#: DDP's default bucket size (``bucket_cap_mb=25``), in bytes
DDP_BUCKET_BYTES = 25 * 1024 * 1024
#: DDP's first bucket (``torch.distributed``'s ``_DEFAULT_FIRST_BUCKET_BYTES``): small, so that the all-reduce of
#: the last layers starts as early as possible
DDP_FIRST_BUCKET_BYTES = 1024 * 1024

BucketHook = Callable[[int, list[torch.nn.Parameter]], None]


def buckets(
    model: torch.nn.Module, bytes_scale: float, cap_bytes: float = DDP_BUCKET_BYTES
) -> list[list[torch.nn.Parameter]]:
    """Parameters in reverse order, cut into buckets of at least ``cap_bytes`` charged bytes (the last may be smaller).

    DDP closes a bucket once adding a parameter would exceed the cap; cutting at "at least the cap" instead
    keeps a proxy model whose single tensors stand for more than 25 MB from making one bucket per tensor.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    out: list[list[torch.nn.Parameter]] = [[]]
    size = 0.0
    for p in reversed(params):
        out[-1].append(p)
        size += p.numel() * p.element_size() * bytes_scale
        if size >= cap_bytes:
            out.append([])
            size = 0.0
    return [b for b in out if b]


def ready_fractions(groups: list[list[torch.nn.Parameter]]) -> list[float]:
    """Fraction of backward done when each bucket is ready (element counts, cumulative)."""
    counts = [sum(p.numel() for p in g) for g in groups]
    total = float(sum(counts)) or 1.0
    out, acc = [], 0
    for c in counts:
        acc += c
        out.append(acc / total)
    return out


@dataclass(frozen=True)
class EmulatedBucket:
    """One of the emulated model's DDP buckets: FP32 bytes, and the fraction of backward done when it is ready."""

    nbytes: float
    ready: float


def emulated_buckets(
    layers: Any, cap_bytes: float = DDP_BUCKET_BYTES, first_cap_bytes: float = DDP_FIRST_BUCKET_BYTES
) -> list[EmulatedBucket]:
    """DDP's buckets over a :class:`~distrepro.hardware.layer_tables.LayerTable`, in backward order.

    A bucket closes once it holds at least its cap (the first 1 MiB, the others 25 MiB); a layer is not split
    (DDP splits at tensor boundaries; a layer's weight and bias land in one bucket but for the rare layer on a
    boundary)."""
    out: list[EmulatedBucket] = []
    size = 0.0
    for layer, (flops_done, _) in zip(layers.backward_order(), layers.ready_points(), strict=True):
        size += 4.0 * layer.params
        cap = first_cap_bytes if not out else cap_bytes
        if size >= cap:
            out.append(EmulatedBucket(size, flops_done))
            size = 0.0
    if size > 0 or not out:
        out.append(EmulatedBucket(size, 1.0))
    return out


@dataclass(frozen=True)
class BucketCharge:
    """What a collective issued from one emulated bucket's callback is charged: the emulated bucket's bytes.

    ``stands_for`` is the emulated bucket's share of the model's bytes in the proxy's units (times the run's
    ``bytes_scale`` it is the bucket's emulated bytes), ``proxy_bytes`` the real bytes of the proxy tensors dealt to
    it. A payload of the bucket's own tensors counts as ``stands_for`` (a part of them, or a compressed copy, as its
    share of it); a bucket that holds no proxy tensor counts any payload, even an empty one, as the whole bucket.
    """

    proxy_bytes: float
    stands_for: float

    def count(self, nbytes: float) -> float:
        """The proxy bytes a payload of ``nbytes`` real bytes is charged as (before the run's ``bytes_scale``)."""
        return nbytes * self.stands_for / self.proxy_bytes if self.proxy_bytes > 0 else self.stands_for


def counted(nbytes: float, charge: BucketCharge | None) -> float:
    """``nbytes`` as charged inside ``charge``'s bucket (unchanged outside one): every engine's rule."""
    return nbytes if charge is None else charge.count(nbytes)


@contextmanager
def charged_as(comm: Any, charge: BucketCharge | None) -> Iterator[None]:
    """Collectives ``comm`` issues inside are charged as the emulated bucket ``charge`` (nothing changes for None).

    The engines' comms and the sensitivity probe's recording comm read ``comm.bucket_charge`` when a call is issued
    (:func:`counted`); the harness, not the method, sets it around each ``on_bucket`` callback."""
    if charge is None:
        yield
        return
    previous = getattr(comm, "bucket_charge", None)
    comm.bucket_charge = charge
    try:
        yield
    finally:
        comm.bucket_charge = previous


@dataclass(frozen=True)
class PlannedBucket:
    """One bucket as the engines launch it: the proxy's parameters it carries (maybe none), the fraction of backward
    done when it is ready, and its charge (None: the proxy's own bytes, a run without a layer table)."""

    params: list[torch.nn.Parameter]
    ready: float
    charge: BucketCharge | None = None


def bucket_plan(model: torch.nn.Module, bytes_scale: float, layers: Any = None) -> list[PlannedBucket]:
    """The buckets a bucketed forward/backward launches, in order: the emulated model's when ``layers`` is its
    per-layer table (one per emulated bucket, each charged as itself), else the proxy's (:func:`buckets`,
    :func:`ready_fractions`). The same plan in both engines and in the sensitivity probe."""
    if layers is None:
        groups = buckets(model, bytes_scale)
        return [PlannedBucket(g, f) for g, f in zip(groups, ready_fractions(groups), strict=True)]
    plan = emulated_buckets(layers)
    total = sum(b.nbytes for b in plan) or 1.0
    ends, acc = [], 0.0
    for b in plan:
        acc += b.nbytes
        ends.append(acc / total)
    params = [p for p in reversed(list(model.parameters())) if p.requires_grad]
    sizes = [p.numel() * p.element_size() for p in params]
    proxy_total = float(sum(sizes))
    assigned: list[list[torch.nn.Parameter]] = [[] for _ in plan]
    done, j = 0.0, 0
    for p, n in zip(params, sizes, strict=True):
        middle = (done + n / 2) / (proxy_total or 1.0)
        done += n
        while j < len(plan) - 1 and ends[j] < middle:
            j += 1
        assigned[j].append(p)
    out = []
    for group, b in zip(assigned, plan, strict=True):
        carried = float(sum(p.numel() * p.element_size() for p in group))
        out.append(PlannedBucket(group, b.ready, BucketCharge(carried, proxy_total * b.nbytes / total)))
    return out


def all_reduce_overlapped(
    ctx: api.WorkerContext, batch: api.Batch, weighting: str, group: api.Group | None = None
) -> None:
    """``forward_backward`` with a DDP-style bucketed, non-blocking gradient all-reduce (over ``group``, all
    ranks by default) launched as buckets become ready; returns when every bucket is reduced (the step costs
    max(compute, last bucket's end)). An emulated bucket that holds none of the proxy's parameters is launched all
    the same, over no tensor: the harness charges it the bucket's bytes."""
    works: list[api.Work] = []
    weight = float(len(batch))

    def launch(_index: int, params: list[torch.nn.Parameter]) -> None:
        grads = []
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            grads.append(p.grad)
        if weighting == "samples":
            work = ctx.comm.weighted_average(grads, weight=weight, group=group, async_op=True)
        else:
            work = ctx.comm.all_reduce_coalesced(grads, op="mean", group=group, async_op=True)
        assert work is not None
        works.append(work)

    ctx.forward_backward(batch, on_bucket=launch)
    for work in works:
        work.wait()
