"""What one lockstep iteration of an arm does, read off the method's own code.

The analytical time model must charge exactly what the engine charges, for any allocation the
method may choose on other hardware. Rather than restating each method's communication pattern
(a second description that could drift from the code), the probe runs the method's real
``setup`` and ``train_step`` once per (rank, batch size) against a recording context: every
``forward_backward`` records its sample count (nothing is computed: gradients are zeros) and every
``ctx.comm`` call records its pattern, group and payload bytes, computed as the in-process fabric
computes them. Inputs are a zero sample broadcast to the batch size, so a paper-scale round of
25,000 images costs no memory.

Only synchronous (lockstep) methods whose iteration is a fixed sequence of collectives can be
replayed this way. DDP-style overlap (:mod:`distrepro.api.overlap`) is recorded as the engine times it: a
``("fb", n)`` event (one forward/backward of n samples), then per gradient bucket a ``("piece",
(fraction, last))`` event (backward run up to that bucket's ready time) followed by the bucket's
non-blocking collective ``("acomm", call)``, its bytes counted as the engines count them inside the bucket
(:func:`distrepro.api.overlap.charged_as`: the emulated bucket's, with a layer table); ``Work.wait()``
records ``("wait", i)`` (the rank's i-th non-blocking call). Anything else (asynchronous gossip, pairing) raises
:class:`NotAnalysable` naming what is missing, and the sweep reports the claim as not analysed.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

import torch

from distrepro.api.method import Batch, Comm, Group, LRSchedule, MethodParams, OptimizerConfig, OptimizerT
from distrepro.api.overlap import BucketCharge, bucket_plan, charged_as, counted
from distrepro.errors import DistreproError
from distrepro.hardware.cluster_layout import cluster_layout
from distrepro.job.resolve import Job
from distrepro.seeding import derive_seed, generator
from distrepro.sensitivity.meta_step import steps_once_on_meta
from distrepro.sensitivity.pattern import VERIFY_EVERY, Pattern, infer
from distrepro.timing import charges
from distrepro.timing.charges import payload_bytes
from distrepro.timing.timemodel import CommCostModel


class NotAnalysable(DistreproError):
    """The arm cannot be re-timed analytically (asynchronous, point-to-point, non-blocking, ...)."""


@dataclass(frozen=True)
class Call:
    """One blocking collective: ``kind`` as :mod:`distrepro.timing.charges` names it, its group, and the
    payload bytes before the emulated workload's ``bytes_scale`` (the fabric scales them)."""

    kind: str
    ranks: tuple[int, ...]
    nbytes: float
    src: int = 0

    def seconds(self, cost: CommCostModel, bytes_scale: float) -> float:
        size = self.nbytes * bytes_scale
        if self.kind == "all_reduce":
            return charges.all_reduce(cost, self.ranks, size)[0]
        if self.kind == "broadcast":
            return charges.broadcast(cost, self.ranks, self.src, size)[0]
        if self.kind == "reduce_scatter":
            return charges.reduce_scatter(cost, self.ranks, size)[0]
        if self.kind == "all_gather":
            return charges.all_gather(cost, self.ranks, size)[0]
        if self.kind == "parameter_server":
            return charges.parameter_server(cost, self.ranks, size)[0]
        if self.kind == "control":
            return charges.control(cost, self.ranks)[0]
        if self.kind.startswith("charge:"):
            return charges.by_pattern(cost, self.kind.removeprefix("charge:"), self.ranks, size)[0]
        raise NotAnalysable(f"no cost for collective {self.kind!r}")


#: one rank's iteration: ("compute", samples) and ("comm", call) events in program order
Event = tuple[str, Any]  # (the same alias as distrepro.sensitivity.pattern.Event)


class _ProbeWork:
    """The handle of a recorded non-blocking collective: ``wait()`` records when the rank waits for it."""

    issue_s = start_s = end_s = 0.0

    def __init__(self, events: list[Event], index: int) -> None:
        self._events, self._index = events, index

    def wait(self) -> None:
        self._events.append(("wait", self._index))

    def is_completed(self) -> bool:
        return True

    def result(self) -> Any:
        return None


class _RecordingComm(Comm):
    """Records each call as the in-process fabric would charge it; moves no data."""

    #: set around a gradient bucket's callback, as the engines' comms (:func:`distrepro.api.overlap.charged_as`)
    bucket_charge: BucketCharge | None = None

    def __init__(self, rank: int, world_size: int, events: list[Event]) -> None:
        self.rank, self.world_size, self.events = rank, world_size, events
        self._world = tuple(range(world_size))
        self._issued = 0  # non-blocking calls so far (the index a wait names)

    def _record(
        self,
        kind: str,
        group: Group | None,
        nbytes: float = 0.0,
        src: int = 0,
        async_op: bool = False,
        extra: float = 0.0,
        bucketed: bool = True,
    ):
        """``nbytes`` of tensors (counted as the current bucket counts them, unless ``bucketed`` is off: a bare
        charge's explicit bytes) plus ``extra`` bytes outside any bucket (a weight)."""
        ranks = self._world if group is None else tuple(group.ranks)
        counted_bytes = counted(float(nbytes), self.bucket_charge) if bucketed else float(nbytes)
        call = Call(kind, ranks, counted_bytes + extra, int(src))
        if not async_op:
            self.events.append(("comm", call))
            return None
        self.events.append(("acomm", call))
        self._issued += 1
        return _ProbeWork(self.events, self._issued - 1)

    def all_reduce(self, tensor, op="sum", group=None, async_op=False):
        return self._record("all_reduce", group, payload_bytes([tensor]), async_op=async_op)

    def all_reduce_coalesced(self, tensors, op="sum", group=None, async_op=False):
        return self._record("all_reduce", group, payload_bytes(tensors), async_op=async_op)

    def weighted_average(self, tensors, weight, group=None, async_op=False):
        return self._record("all_reduce", group, payload_bytes(tensors), async_op=async_op, extra=4)  # + the weight

    def broadcast(self, tensor, src, group=None, async_op=False):
        return self._record("broadcast", group, payload_bytes([tensor]), src=src, async_op=async_op)

    def reduce_scatter(self, output, input, op="sum", group=None, async_op=False):
        return self._record("reduce_scatter", group, payload_bytes([input]), async_op=async_op)

    def all_gather(self, output, input, group=None, async_op=False):
        return self._record("all_gather", group, payload_bytes([input]), async_op=async_op)

    def all_gather_object(self, obj, group=None):
        self._record("control", group, bucketed=False)
        return [obj] * len(self._world if group is None else group.ranks)

    def barrier(self, group=None) -> None:
        self._record("control", group, bucketed=False)

    def new_group(self, ranks):
        return Group(tuple(int(r) for r in ranks))

    def exchange(self, peer, tensor):
        raise NotAnalysable("point-to-point exchanges (gossip) depend on pairing order; not replayed analytically")

    def pair(self, neighbors):
        raise NotAnalysable("pairing (asynchronous gossip) is not replayed analytically")

    def ps_sync(self, tensors, weight, group=None, receive="collective") -> None:
        kind = "parameter_server_async" if receive == "async" else "parameter_server"
        self._record(kind, group, payload_bytes(tensors), extra=4)

    def charge(self, pattern, nbytes, group=None, async_op=False) -> None:
        self._record(f"charge:{pattern}", group, float(nbytes), bucketed=False)

    @property
    def bytes_sent(self) -> int:
        return 0


class _Clock:
    t = compute_s = comm_s = idle_s = 0.0

    def now(self) -> float:
        return 0.0


#: per meta parameter (by id): the parameter, its shape, dtype and strides then, and the zero gradient made for it
ZeroCache = dict[int, tuple[torch.Tensor, tuple[Any, ...], torch.Tensor]]


def _zeros_like(p: torch.Tensor, cache: ZeroCache) -> torch.Tensor:
    """``torch.zeros_like(p)``; on meta, a clone of the one made for ``p`` before while ``p``'s shape, dtype and
    strides are unchanged: the same meta tensor (a clone keeps a dense tensor's strides) for a microsecond instead
    of the twenty ``zeros_like`` takes there (C-ADP's proxy report made 3,800 gradients a parameter). A fresh
    clone each time, so nothing a method does to one gradient reaches the next; real tensors are always new."""
    if not p.is_meta:
        return torch.zeros_like(p)
    layout = (p.shape, p.dtype, p.stride())
    found = cache.get(id(p))
    if found is None or found[0] is not p or found[1] != layout:
        found = cache[id(p)] = (p, layout, torch.zeros_like(p))
    return found[2].clone()


class _ProbeContext:
    """A :class:`distrepro.api.method.WorkerContext` that records instead of computing."""

    def __init__(
        self, job: Job, rank: int, model: torch.nn.Module, events: list[Event], zeros: ZeroCache | None = None
    ) -> None:
        self.rank, self.world_size, self.model = rank, job.world_size, model
        self.device = torch.device("cpu")
        self.comm = _RecordingComm(rank, job.world_size, events)
        self.clock = _Clock()
        self.rng = generator(*job.seed_parts, "rank", rank, "probe")
        self.train_state = MappingProxyType({"step": 0, "epoch": 0.0, "samples": 0, "budget": job.config.budget})
        self._events = events
        self._seed_parts = (*job.seed_parts, "rank", rank)
        self._bytes_scale = job.bytes_scale
        self._layers = job.workload.layers if job.workload is not None else None
        self.lr: float | None = None  # no schedule is applied in a probe: the method's own LR
        self.total_steps: int | None = None
        self.lr_schedule: LRSchedule | None = None
        self.cluster = cluster_layout(job.profile)
        self._optimizer_override = job.config.optimizer
        self._zeros: ZeroCache = {} if zeros is None else zeros

    def register_optimizer(self, optimizer: OptimizerT) -> OptimizerT:
        return steps_once_on_meta(optimizer)

    def build_optimizer(
        self, parameters: Iterable[torch.Tensor] | Iterable[dict[str, Any]], default: OptimizerConfig
    ) -> torch.optim.Optimizer:
        from distrepro.api.params import overlay
        from distrepro.training.optimizers import build_optimizer

        return steps_once_on_meta(build_optimizer(parameters, overlay(default, self._optimizer_override)))

    def forward_backward(
        self,
        batch: Batch,
        zero_grad: bool = True,
        forward_with: Any = None,
        on_bucket: Any = None,
        backward: bool = True,  # charged alike either way (harness_worker); the zeros stand for any gradient
    ) -> float:
        if zero_grad:
            self.model.zero_grad(set_to_none=True)
        for p in self.model.parameters():
            if p.grad is None:
                p.grad = _zeros_like(p, self._zeros)
        if on_bucket is None:
            self._events.append(("compute", len(batch)))
            return 0.0
        # as distrepro.engine.harness_worker's _backward_buckets: backward up to each bucket's ready time, then its
        # callback
        # (which issues the bucket's non-blocking collective); the times themselves are the simulator's
        plan = bucket_plan(self.model, self._bytes_scale, self._layers)
        self._events.append(("fb", len(batch)))
        for i, bucket in enumerate(plan):
            self._events.append(("piece", (bucket.ready, i == len(plan) - 1)))
            with charged_as(self.comm, bucket.charge):
                on_bucket(i, bucket.params)
        return 0.0

    def seed(self, *parts: object) -> int:
        return derive_seed(*self._seed_parts, *parts)

    def record(self, name: str, value: float) -> None:
        pass


class Prober:
    """Per-rank event lists of one iteration (and of ``finalize``) of ``job``'s method, cached by
    (params, rank, batch size): lockstep methods repeat the same pattern for the same batch. New
    sizes are predicted once a rank's scaling is learnt (:mod:`distrepro.sensitivity.pattern`)."""

    def __init__(self, job: Job, learn: bool = True) -> None:
        if not job.method.cls.synchronous:
            raise NotAnalysable(f"method {job.method.name} is asynchronous: its timing depends on event order")
        self.job = job
        self.model = job.make_model()
        # a copy on the meta device: shapes and bytes without storage, so the method's optimizer steps in a probe
        # cost only Python; a method that reads values (or mixes devices) raises, and is then probed on CPU
        self._meta: torch.nn.Module | None = copy.deepcopy(self.model).to("meta")
        self._sample = job.example_batch
        self._cache: dict[tuple[str, int, int], list[Event]] = {}
        self._final: dict[tuple[str, int], list[Event]] = {}
        self._first: dict[tuple[str, int], tuple[int, list[Event]]] = {}
        self._rules: dict[tuple[str, int], Pattern | None] = {}  # None: predictions failed, always probe
        self._last: dict[int, Pattern] = {}  # per rank, the latest pattern learnt (under any params)
        self.learn = learn  # False: probe every (params, rank, size); for checking the shortcut
        self.predicted = self.probes = 0
        self._zeros: ZeroCache = {}  # the meta model's zero gradients, cloned for each probe (_zeros_like)

    def _batch(self, n: int) -> Batch:
        x, y = self._sample
        return Batch(x.expand(n, *x.shape[1:]), y.expand(n))

    def _run(self, params: MethodParams, rank: int, n: int | None) -> list[Event]:
        if self._meta is not None:
            try:
                return self._run_on(self._meta, params, rank, n)
            except NotAnalysable:
                raise
            except Exception:  # value-dependent or device-mixing code: probe on real (zero) tensors from now on
                self._meta = None
        return self._run_on(self.model, params, rank, n)

    def _run_on(self, model: torch.nn.Module, params: MethodParams, rank: int, n: int | None) -> list[Event]:
        events: list[Event] = []
        ctx = _ProbeContext(self.job, rank, model, events, self._zeros)
        method = self.job.method.cls(params)
        method.setup(ctx)  # type: ignore[arg-type]
        if n is None:
            method.finalize(ctx)  # type: ignore[arg-type]
        else:
            method.train_step(ctx, self._batch(n))  # type: ignore[arg-type]
        self.probes += 1
        return events

    def _borrow(self, key: str, params: MethodParams, rank: int) -> Pattern | None:
        """The rank's pattern learnt under other params (e.g. another sync period), if two cheap probes
        under these params (1 sample, and a few micro-batches) give exactly what it predicts."""
        rule = self._last.get(rank)
        if rule is None:
            return None
        sizes = (1, 2 * rule.micro + 1) if rule.micro is not None else (1, min(2, rule.upto))
        return rule if all(self._run(params, rank, n) == rule.events(n) for n in sizes) else None

    def _events(self, key: str, params: MethodParams, rank: int, n: int) -> list[Event]:
        """Probe, or predict from the rank's learnt :class:`~distrepro.sensitivity.pattern.Pattern`."""
        if not self.learn:
            return self._run(params, rank, n)
        slot = (key, rank)
        if slot not in self._rules and rank in self._last:
            borrowed = self._borrow(key, params, rank)
            if borrowed is not None:
                self._rules[slot] = borrowed
        rule = self._rules.get(slot)
        if rule is not None and rule.covers(n):
            self.predicted += 1
            if self.predicted % VERIFY_EVERY:
                return rule.events(n)
            real = self._run(params, rank, n)  # spot check
            if real != rule.events(n):
                self._rules[slot] = None  # this method does not scale that way: probe every size from now on
                self._last.pop(rank, None)
            return real
        real = self._run(params, rank, n)
        if n > 0 and slot not in self._rules:
            first = self._first.setdefault(slot, (n, real))
            if first[0] != n:
                self._rules[slot] = infer(first, (n, real))
        elif n > 0 and rule is not None:  # a whole-batch rule asked beyond the sizes it has seen
            self._rules[slot] = replace(rule, upto=max(rule.upto, n)) if real == rule.events(n) else None
        if self._rules.get(slot) is not None:
            self._last[rank] = self._rules[slot]  # type: ignore[assignment]
        return real

    def iteration(self, params: MethodParams, batches: Sequence[int]) -> list[list[Event]]:
        """Every rank's events for one iteration where rank r trains on ``batches[r]`` samples."""
        key = params.model_dump_json()
        out = []
        for rank, n in enumerate(batches):
            k = (key, rank, int(n))
            if k not in self._cache:
                self._cache[k] = self._events(key, params, rank, int(n))
            out.append(self._cache[k])
        return out

    def finalize(self, params: MethodParams) -> list[list[Event]]:
        key = params.model_dump_json()
        out = []
        for rank in range(self.job.world_size):
            if (key, rank) not in self._final:
                self._final[(key, rank)] = self._run(params, rank, None)
            out.append(self._final[(key, rank)])
        return out
