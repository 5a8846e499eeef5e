"""The harness side of one worker: what ``WorkerContext`` gives a method.

The harness owns the loss (cross-entropy) and charges the modelled compute time of every
``forward_backward`` to the worker's virtual clock, so a method cannot compute without paying.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

import torch
import torch.nn.functional as F

from suite.api import Batch, Comm
from suite.engine.clock import VirtualClock
from suite.seeding import derive_seed, generator

#: (rank, n_samples, step_index, at_s) -> seconds
ComputeCharge = Callable[[int, int, int, float], float]


class HarnessWorker:
    """Implements :class:`suite.api.WorkerContext` for one rank (any engine)."""

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
    ) -> None:
        self.rank = rank
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
        # training ingredients (suite.ingredients): set by the harness
        self.lr: float | None = None  # the LR of the step about to run (the schedule's)
        self.total_steps: int | None = None  # the run's length in steps (None for an emulated_seconds budget)
        self.label_smoothing = 0.0
        self.optimizer_override: Any | None = None  # the run config's optimizer: block
        self.optimizers: list[Any] = []  # registered: the harness sets their LR before every step

    def register_optimizer(self, optimizer: Any) -> Any:
        self.optimizers.append(optimizer)
        return optimizer

    def build_optimizer(self, parameters: Any, default: Any) -> torch.optim.Optimizer:
        from suite.ingredients import overlay
        from suite.optimizers import build_optimizer

        return self.register_optimizer(build_optimizer(parameters, overlay(default, self.optimizer_override)))

    def forward_backward(
        self,
        batch: Batch,
        zero_grad: bool = True,
        forward_with: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> float:
        if zero_grad:
            self.model.zero_grad(set_to_none=True)
        if len(batch) == 0:  # a worker allocated no data contributes a zero gradient for free
            for p in self.model.parameters():
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
            self.gradients += 1
            return float("nan")
        wall0 = time.perf_counter()
        inputs = batch.inputs.to(self.device, non_blocking=True)
        targets = batch.targets.to(self.device, non_blocking=True)
        loss = F.cross_entropy((forward_with or self.model)(inputs), targets, label_smoothing=self.label_smoothing)
        loss.backward()
        n = len(batch)
        dt = self._charge(self.rank, n, self.gradients, self.clock.now())
        self.clock.compute(dt)
        if self.pacer is not None:
            self.pacer(self.clock.t)
            dt = (time.perf_counter() - wall0) / self.pacer.dilation
        self.gradients += 1
        self.samples_computed += n
        self.epoch_samples += n
        self.epoch_compute_s += dt
        self.last_loss = float(loss.detach())
        return self.last_loss

    def seed(self, *parts: object) -> int:
        return derive_seed(*self._seed_parts, *parts)

    def record(self, name: str, value: float) -> None:
        self.records[name] = float(value)

    def update_state(self, **values: Any) -> None:
        """Harness-only: refresh the read-only ``train_state`` view."""
        self._state.update(values)

    def measured_speed_and_reset(self) -> float:
        """Samples per compute-second over the epoch just ended (NaN if nothing ran)."""
        speed = self.epoch_samples / self.epoch_compute_s if self.epoch_compute_s > 0 else float("nan")
        self.epoch_samples, self.epoch_compute_s = 0, 0.0
        return speed
