"""The harness side of one worker: what ``WorkerContext`` gives a method.

The harness owns the loss (cross-entropy) and charges the modelled compute time of every
``forward_backward`` to the worker's virtual clock, so a method cannot compute without paying.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable
from types import MappingProxyType
from typing import Any, Protocol

import torch
import torch.nn.functional as F

from distrepro.api.method import Batch, Comm, LRSchedule, OptimizerConfig, OptimizerT
from distrepro.api.overlap import PlannedBucket, bucket_plan, charged_as
from distrepro.engine.clock import VirtualClock
from distrepro.seeding import derive_seed, generator
from distrepro.timing.contention import ContentionLedger

#: (rank, n_samples, step_index, at_s) -> seconds
ComputeCharge = Callable[[int, int, int, float], float]


class Batcher(Protocol):
    """Computes a worker's forward/backward together with its peers' (the in-process engine's
    :class:`~distrepro.engine.inprocess.batching.ReplicaBatcher`, with ``batched_replicas`` on)."""

    def eligible(self, worker: HarnessWorker) -> bool: ...

    def forward_backward(self, worker: HarnessWorker, inputs: torch.Tensor, targets: torch.Tensor) -> float: ...


class HarnessWorker:
    """Implements :class:`distrepro.api.method.WorkerContext` for one rank (any engine)."""

    def __init__(
        self,
        rank: int,
        world_size: int,
        model: torch.nn.Module,
        comm: Comm,
        clock: VirtualClock,
        compute_charge: ComputeCharge,
        seed_parts: tuple[object, ...],
        device: torch.device | None = None,
        bytes_scale: float = 1.0,
        backward_fraction: float = 2.0 / 3.0,
        cluster: Any = None,
        layers: Any = None,
        framework_s: float = 0.0,
        contention: float = 0.0,
    ) -> None:
        self.rank = rank
        #: read-only layout of the emulated cluster (:class:`distrepro.api.method.ClusterLayout`)
        self.cluster = cluster
        self._bytes_scale, self._backward_fraction = bytes_scale, backward_fraction
        #: the emulated model's per-layer table (buckets and ready times follow it), None: the proxy's layers
        self._layers = layers
        #: what DDP's reducer adds to a bucketed forward/backward (:mod:`distrepro.timing.framework`)
        self._framework_s = framework_s
        #: fraction by which backward slows while a synchronous collective overlaps it
        #: (:mod:`distrepro.timing.contention`)
        clock.contention = ContentionLedger(contention)
        self._buckets: tuple[int, list[PlannedBucket]] | None = None
        self.world_size = world_size
        self.model = model
        self.comm = comm
        self.clock = clock
        self.device = device or torch.device("cpu")
        self._charge = compute_charge
        self._seed_parts = (*seed_parts, "rank", rank)
        self.rng = generator(*self._seed_parts, "method")
        self._state: dict[str, Any] = {"step": 0, "epoch": 0.0, "samples": 0, "budget": None}
        self.train_state = MappingProxyType(self._state)
        self.records: dict[str, float] = {}
        self.gradients = 0  # forward_backward calls so far
        self.samples_computed = 0
        self.last_loss = float("nan")
        # per-epoch compute accounting, for measured speeds (waiting excluded)
        self.epoch_samples = 0
        self.epoch_compute_s = 0.0
        #: set by the distributed engine when throttling: wall time then follows the virtual
        #: clock, and measured speeds come from wall time (a throttled slow device really is slow)
        self.pacer: Any | None = None
        # training ingredients (distrepro.training.ingredients): set by the harness
        self.lr: float | None = None  # the LR of the step about to run (the schedule's)
        self.total_steps: int | None = None  # the run's length in steps (None for an emulated_seconds budget)
        self.lr_schedule: LRSchedule | None = None  # the run's schedule; None without a declared peak LR
        self.label_smoothing = 0.0
        self.optimizer_override: OptimizerConfig | None = None  # the run config's optimizer: block
        self.optimizers: list[torch.optim.Optimizer] = []  # registered: the harness sets their LR before every step
        #: set by the in-process engine when it batches replicas; None: every forward/backward computes at once
        self.batcher: Batcher | None = None

    def register_optimizer(self, optimizer: OptimizerT) -> OptimizerT:
        self.optimizers.append(optimizer)
        return optimizer

    def build_optimizer(
        self, parameters: Iterable[torch.Tensor] | Iterable[dict[str, Any]], default: OptimizerConfig
    ) -> torch.optim.Optimizer:
        from distrepro.api.params import overlay
        from distrepro.training.optimizers import build_optimizer

        return self.register_optimizer(build_optimizer(parameters, overlay(default, self.optimizer_override)))

    def forward_backward(
        self,
        batch: Batch,
        zero_grad: bool = True,
        forward_with: Callable[[torch.Tensor], torch.Tensor] | None = None,
        on_bucket: Callable[[int, list[torch.nn.Parameter]], None] | None = None,
        backward: bool = True,
    ) -> float:
        """See :meth:`distrepro.api.method.WorkerContext.forward_backward`; ``on_bucket(i, params)`` is called at the
        virtual time DDP's gradient bucket ``i`` would be ready (:mod:`distrepro.api.overlap`). ``backward=False``
        charges the same time as the full call (the charge is modelled, never measured) but computes no gradient."""
        if not backward and on_bucket is not None:
            raise ValueError("forward_backward(backward=False) computes no gradient: no bucket is ever ready")
        if zero_grad:
            self.model.zero_grad(set_to_none=True)
        if len(batch) == 0:  # a worker allocated no data contributes a zero gradient for free
            for p in self.model.parameters() if backward else ():
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
            self.gradients += 1
            if on_bucket is not None:  # every rank launches the same buckets, ready at once here
                for i, bucket in enumerate(self._bucket_plan()):
                    with charged_as(self.comm, bucket.charge):
                        on_bucket(i, bucket.params)
            return float("nan")
        wall0 = time.perf_counter()
        inputs = batch.inputs.to(self.device, non_blocking=True)
        targets = batch.targets.to(self.device, non_blocking=True)
        if backward and forward_with is None and self.batcher is not None and self.batcher.eligible(self):
            self.last_loss = self.batcher.forward_backward(self, inputs, targets)
        else:
            # without the backward, the forward needs no graph either; its loss (and BatchNorm statistics, dropout
            # draws) are bit for bit those of the autograd forward
            with contextlib.nullcontext() if backward else torch.no_grad():
                out = (forward_with or self.model)(inputs)
                loss = F.cross_entropy(out, targets, label_smoothing=self.label_smoothing)
            if backward:
                loss.backward()
            self.last_loss = float(loss.detach())
        n = len(batch)
        dt = self._charge(self.rank, n, self.gradients, self.clock.now())
        if on_bucket is None:
            self.clock.compute(dt)
        else:
            self._backward_buckets(dt, on_bucket)
        if self.pacer is not None:
            self.pacer(self.clock.t)
            dt = (time.perf_counter() - wall0) / self.pacer.dilation
        self.gradients += 1
        self.samples_computed += n
        self.epoch_samples += n
        self.epoch_compute_s += dt
        return self.last_loss

    def _bucket_plan(self) -> list[PlannedBucket]:
        key = id(self.model)
        if self._buckets is None or self._buckets[0] != key:
            self._buckets = (key, bucket_plan(self.model, self._bytes_scale, self._layers))
        return self._buckets[1]

    def _backward_buckets(self, dt: float, on_bucket: Callable[[int, list[torch.nn.Parameter]], None]) -> None:
        """Charge ``dt`` in pieces: forward, then backward up to each bucket's ready time, calling back there; the
        collectives launched from the callbacks overlap this backward (the clock charges their contention) and are
        charged as the bucket (:func:`distrepro.api.overlap.charged_as`: the emulated model's, with a layer table)."""
        plan = self._bucket_plan()
        self.clock.begin_backward()
        backward = dt * self._backward_fraction + self._framework_s
        dt += self._framework_s
        self.clock.compute(dt - backward)
        done = dt - backward
        for i, bucket in enumerate(plan):
            target = dt - backward + backward * bucket.ready if i < len(plan) - 1 else dt
            self.clock.compute(max(0.0, target - done))
            done = target
            if i == len(plan) - 1:  # backward is over: the last bucket's collective overlaps none of it
                self.clock.end_backward()
            with charged_as(self.comm, bucket.charge):
                on_bucket(i, bucket.params)
        self.clock.end_backward()  # no bucket at all (a model without gradients): close it anyway

    def seed(self, *parts: object) -> int:
        return derive_seed(*self._seed_parts, *parts)

    def record(self, name: str, value: float) -> None:
        self.records[name] = float(value)

    def update_state(self, **values: Any) -> None:
        """Harness-only: refresh the read-only ``train_state`` view."""
        self._state.update(values)

    def state_dict(self) -> dict[str, Any]:
        """The worker's own counters and generator (model, method, clock and comm checkpoint themselves)."""
        return {
            "train_state": dict(self._state),
            "records": dict(self.records),
            "gradients": self.gradients,
            "samples_computed": self.samples_computed,
            "last_loss": self.last_loss,
            "epoch_samples": self.epoch_samples,
            "epoch_compute_s": self.epoch_compute_s,
            "rng": self.rng.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._state.update(state["train_state"])
        self.records = dict(state["records"])
        self.gradients, self.samples_computed = state["gradients"], state["samples_computed"]
        self.last_loss = state["last_loss"]
        self.epoch_samples, self.epoch_compute_s = state["epoch_samples"], state["epoch_compute_s"]
        self.rng.set_state(state["rng"])

    def measured_speed_and_reset(self) -> float:
        """Samples per compute-second over the epoch just ended (NaN if nothing ran)."""
        speed = self.epoch_samples / self.epoch_compute_s if self.epoch_compute_s > 0 else float("nan")
        self.epoch_samples, self.epoch_compute_s = 0, 0.0
        return speed
