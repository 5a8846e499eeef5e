"""An arm's emulated time on a given profile, without training: the engine's clock, replayed.

Emulated time depends on the profile (speeds, links), on the allocation the method picks *for that
profile* (C-ADP's solver and Chao's proportional split read the device speeds), on the step
counts and on the bytes, never on the values of the gradients. :func:`simulate` therefore walks
the same schedule as :class:`suite.engine.inprocess.run.InProcessEngine` for a lockstep method:

* the method's own ``warmup_steps``/``allocate`` (profiled speeds charged by the clock, re-solved
  at every epoch boundary from the speeds measured over the previous epoch);
* per iteration, each rank's events from :class:`~suite.sensitivity.probe.Prober`: a compute
  call of n samples costs ``ComputeModel.step_seconds`` at the rank's current time (speed changes,
  jitter and stragglers with the run's own seeds), a collective starts when its last member
  arrives and ends at ``start + cost`` for all (:mod:`suite.engine.charges`);
* the budget, epochs and samples by :class:`suite.engine.schedule.TrainingSchedule`.

The arithmetic is the engine's, in the same order, so at a profile's central values the result
equals the run's logged ``final/emulated_s`` to rounding (``tests/test_sensitivity_analytic.py``).
Evaluation is untimed in the engine and so absent here; time to a target is read where as many
samples have been processed as the real run needed to reach it (:meth:`Timing.at_samples`).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from suite.api import Allocation
from suite.engine.partition import shard_sizes
from suite.engine.schedule import TrainingSchedule
from suite.engine.warmup import emulated_profile
from suite.job import Job
from suite.sensitivity.probe import Call, Event, NotAnalysable, Prober


@dataclass
class Timing:
    """What the run would log for time: final emulated seconds, samples, steps, and the emulated
    time and samples processed after each iteration (index i = global step ``i + 1``)."""

    emulated_s: float
    samples: int
    steps: int
    epochs: float
    step_end_s: list[float] = field(default_factory=list)
    step_samples: list[int] = field(default_factory=list)

    def at_step(self, step: int) -> float:
        """Emulated time of the evaluation at global ``step`` (the final one after ``finalize``)."""
        if step >= self.steps or step < 1:
            return self.emulated_s
        return self.step_end_s[step - 1]

    def samples_at(self, step: int) -> int:
        return self.samples if step >= self.steps or step < 1 else self.step_samples[step - 1]

    def at_samples(self, samples: int) -> float:
        """Emulated time at the first evaluation point with at least ``samples`` processed: where a run
        that reached a quality after that much data would reach it here (a sync period that changes the
        number of steps leaves the data needed, not the step index, as the comparable quantity)."""
        i = bisect.bisect_left(self.step_samples, samples)
        return self.emulated_s if i >= self.steps - 1 else self.step_end_s[i]


def _batches(job: Job, alloc: Allocation) -> list[int]:
    """Per-rank samples per iteration: a rank with batch 0 or an empty shard gets empty batches."""
    n = len(job.bundle.train)
    sizes = shard_sizes(n, alloc.shares) if alloc.partition == "iid_shards" else [n] * job.world_size
    return [b if b > 0 and s > 0 else 0 for b, s in zip(alloc.batch_sizes, sizes, strict=True)]


class _Clocks:
    """Per-rank virtual time, gradient counters and per-epoch compute accounting."""

    def __init__(self, job: Job) -> None:
        k = job.world_size
        self.job = job
        self.t = [0.0] * k
        self.grads = [0] * k
        self.ep_samples = [0] * k
        self.ep_compute = [0.0] * k
        self._costs: dict[Call, float] = {}

    def compute(self, rank: int, n: int) -> None:
        if n > 0:
            dt = self.job.compute.step_seconds(rank, n, self.grads[rank], self.t[rank])
            self.t[rank] += dt
            self.ep_samples[rank] += n
            self.ep_compute[rank] += dt
        self.grads[rank] += 1

    def collective(self, call: Call) -> None:
        cost = self._costs.get(call)
        if cost is None:
            cost = self._costs[call] = call.seconds(self.job.cost, self.job.bytes_scale)
        start = max(self.t[r] for r in call.ranks)
        end = start + cost
        for r in call.ranks:  # VirtualClock.finish_op: idle until start, then communicate to end
            self.t[r] = start + (end - start)

    def run(self, events: Sequence[Sequence[Event]]) -> None:
        """Play every rank's events: compute runs ahead to the rank's next collective, then the
        collectives complete in program order (they are blocking and matched across ranks)."""
        pos = [0] * len(events)
        calls = [[e[1] for e in ev if e[0] == "comm"] for ev in events]
        if len({len(c) for c in calls}) > 1:
            raise NotAnalysable("ranks issue different numbers of collectives in one iteration")
        for i in range(len(calls[0]) if calls else 0):
            call = calls[0][i]
            for r in call.ranks:
                ev = events[r]
                while ev[pos[r]][0] == "compute":
                    self.compute(r, ev[pos[r]][1])
                    pos[r] += 1
                if ev[pos[r]][1].kind != call.kind:
                    raise NotAnalysable(f"rank {r} calls {ev[pos[r]][1].kind} where rank 0 calls {call.kind}")
                pos[r] += 1
            self.collective(call)
        for r, ev in enumerate(events):
            for kind, value in ev[pos[r] :]:
                if kind == "compute":
                    self.compute(r, value)

    def measured_and_reset(self) -> tuple[float, ...]:
        """Samples per compute-second over the epoch just ended (NaN where nothing ran), as the engine."""
        out = tuple(s / c if c > 0 else math.nan for s, c in zip(self.ep_samples, self.ep_compute, strict=True))
        self.ep_samples = [0] * len(out)
        self.ep_compute = [0.0] * len(out)
        return out


def simulate(job: Job, prober: Prober) -> Timing:
    """Emulated time of ``job`` (its profile, compute and cost models, params) without training."""
    cls = job.method.cls
    if not cls.synchronous:
        raise NotAnalysable(f"method {job.method.name} is asynchronous")
    warm = cls.warmup_steps(job.params)
    profiled = emulated_profile(job, warm) if warm > 0 else None
    alloc = job.allocate(0, profiled=profiled)
    schedule = TrainingSchedule(job.config.budget, job.config.eval, len(job.bundle.train), job.world_size)
    clocks = _Clocks(job)
    epoch = 0
    step_end: list[float] = []
    step_samples: list[int] = []
    batches = _batches(job, alloc)
    while True:
        clocks.run(prober.iteration(job.params, batches))
        schedule.record_iteration(sum(batches), max(clocks.t))
        step_end.append(schedule.emulated_s)
        step_samples.append(schedule.samples)
        e = schedule.epoch_index()
        if e > epoch:  # the engine's _maybe_reallocate
            epoch = e
            new = job.allocate(e, clocks.measured_and_reset(), alloc, profiled)
            if new != alloc:
                alloc, batches = new, _batches(job, new)
        if schedule.budget_spent():
            break
    clocks.run(prober.finalize(job.params))
    return Timing(max(clocks.t), schedule.samples, len(step_end), schedule.epochs, step_end, step_samples)
