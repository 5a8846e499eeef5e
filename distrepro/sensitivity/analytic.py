"""An arm's emulated time on a given profile, without training: the engine's clock, replayed.

Emulated time depends on the profile (speeds, links), on the allocation the method picks *for that
profile* (C-ADP's solver and Chao's proportional split read the device speeds), on the step
counts and on the bytes, never on the values of the gradients. :func:`simulate` therefore walks
the same schedule as :class:`distrepro.engine.inprocess.run.InProcessEngine` for a lockstep method:

* the method's own ``warmup_steps``/``allocate`` (profiled speeds charged by the clock, re-solved
  at every epoch boundary from the speeds measured over the previous epoch);
* per iteration, each rank's events from :class:`~distrepro.sensitivity.probe.Prober`: a compute
  call of n samples costs ``ComputeModel.step_seconds`` at the rank's current time (speed changes,
  jitter and stragglers with the run's own seeds), a collective starts when its last member
  arrives and ends at ``start + cost`` for all (:mod:`distrepro.timing.charges`);
* DDP-style overlap (:mod:`distrepro.api.overlap`): backward is the profile's ``backward_fraction`` of the
  step's compute and reaches bucket i's ready time after the share of elements up to it; bucket i's
  all-reduce starts at ``max(last member ready, bucket i-1's end)`` (one FIFO lane per group) and the
  step ends, per rank, at ``max(compute end, last bucket's end)`` when the rank waits;
* the budget, epochs and samples by :class:`distrepro.timing.budget_schedule.TrainingSchedule`.

The arithmetic is the engine's, in the same order, so at a profile's central values the result
equals the run's logged ``final/emulated_s`` to rounding (``tests/test_sensitivity_analytic.py``).
Evaluation is untimed in the engine and so absent here; time to a target is read where as many
samples have been processed as the real run needed to reach it (:meth:`Timing.at_samples`).
"""

from __future__ import annotations

import bisect
import math
import weakref
from dataclasses import dataclass, field

from distrepro.api.method import Allocation
from distrepro.job.resolve import Job
from distrepro.sensitivity.probe import Call, Event, NotAnalysable, Prober
from distrepro.sensitivity.schedule import Schedule, Schedules
from distrepro.timing import charges, framework
from distrepro.timing.budget_schedule import TrainingSchedule
from distrepro.timing.contention import ContentionLedger
from distrepro.timing.warmup_profile import emulated_profile
from distrepro.training.partition import shard_sizes


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


#: a communicator's FIFO channel: its group's ranks
Lane = tuple[int, ...]


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
        self._backward = job.profile.backward_fraction()
        layers = job.workload.layers if job.workload is not None else None
        #: per rank, what DDP's reducer adds to a bucketed forward/backward (as the engine charges it)
        figures = framework.costs(job.profile)
        self._framework = [framework.bucketed_step_overhead_s(job.profile.device(r), layers, figures) for r in range(k)]
        #: per rank, the open bucketed forward/backward: [dt, backward seconds, charged so far] (None: n = 0)
        self._fb: list[list[float] | None] = [None] * k
        #: per rank, (start, end, issue, backward tag) of each non-blocking call of this iteration, by issue order
        self._works: list[list[tuple[float, float, float, int | None]]] = [[] for _ in range(k)]
        #: per rank, the contention of collectives with backward (the clock's ledger) and the seconds not computing
        self.contention = [ContentionLedger(figures.contention) for _ in range(k)]
        self.slack = [0.0] * k

    def compute(self, rank: int, n: int) -> None:
        if n > 0:
            dt = self.job.compute.step_seconds(rank, n, self.grads[rank], self.t[rank])
            self.t[rank] += dt
            self.ep_samples[rank] += n
            self.ep_compute[rank] += dt
        self.grads[rank] += 1

    def forward_backward(self, rank: int, n: int) -> None:
        """A bucketed forward/backward (distrepro.engine.harness_worker's ``_backward_buckets``): the forward part
        is charged
        now, backward piece by piece up to each bucket's ready time (:meth:`piece`); one cost draw."""
        self._fb[rank] = None
        if n > 0:
            dt = self.job.compute.step_seconds(rank, n, self.grads[rank], self.t[rank])
            backward = dt * self._backward + self._framework[rank]
            dt += self._framework[rank]
            self.contention[rank].begin(self.t[rank])
            self.t[rank] += dt - backward
            self._fb[rank] = [dt, backward, dt - backward]
            self.ep_samples[rank] += n
            self.ep_compute[rank] += dt
        self.grads[rank] += 1

    def piece(self, rank: int, fraction: float, last: bool) -> None:
        """Backward up to the ready time of the bucket a ``fraction`` of the elements in (a zero batch has
        every bucket ready at once)."""
        state = self._fb[rank]
        if state is None:
            return
        dt, backward, done = state
        target = dt if last else dt - backward + backward * fraction
        self.t[rank] += max(0.0, target - done)
        state[2] = target
        if last:
            self.contention[rank].end(self.t[rank], self.slack[rank])

    def wait(self, rank: int, index: int) -> None:
        """``Work.wait()``: the contention the operation owes backward, then idle until it starts and communicate to
        its end (``finish_op``)."""
        start, end, issue, tag = self._works[rank][index]
        owed, start, end = self.contention[rank].settle(tag, issue, start, end, self.t[rank], self.slack[rank])
        self.t[rank] += owed
        before = self.t[rank]
        if start > self.t[rank]:
            self.t[rank] = start
        if end > self.t[rank]:
            self.t[rank] += end - self.t[rank]
        self.slack[rank] += self.t[rank] - before

    def _local(self, rank: int, event: Event) -> None:
        kind, value = event
        if kind == "compute":
            self.compute(rank, value)
        elif kind == "fb":
            self.forward_backward(rank, value)
        elif kind == "piece":
            self.piece(rank, *value)
        elif kind == "wait":
            self.wait(rank, value)
        else:
            raise NotAnalysable(f"no replay for event {kind!r}")

    def collective(self, call: Call, issue: dict[int, float], lanes: dict[Lane, float]) -> tuple[float, float]:
        """Start and end of ``call`` issued at these times: it starts when its last member has issued it and
        its lane (its group's FIFO channel, :mod:`distrepro.engine.inprocess.lanes`) has finished the non-blocking
        operations queued before it; alone on the links it costs the alpha-beta charge."""
        start = max(issue.values())
        if call.kind == "parameter_server_async":  # its charge depends on when each member arrived
            size = call.nbytes * self.job.bytes_scale
            arrivals = [issue[r] for r in call.ranks]
            cost = charges.parameter_server_async(self.job.cost, call.ranks, size, arrivals)[0]
            start = max(start, lanes.get(call.ranks, start))
            return start, start + cost
        if self.job.cost.noisy:  # every call draws its own link-noise factor, in the engine's order
            cost = call.seconds(self.job.cost, self.job.bytes_scale)
        else:
            cached = self._costs.get(call)
            cost = cached if cached is not None else call.seconds(self.job.cost, self.job.bytes_scale)
            self._costs[call] = cost
        start = max(start, lanes.get(call.ranks, start))
        return start, start + cost

    def run(self, plan: Schedule) -> None:
        """Play every rank's events: compute runs ahead to the rank's next collective, then the
        collectives complete in program order (matched across their members, as on one communicator;
        ranks outside a group, or idle, issue nothing for it), in the order ``plan``
        (:func:`~distrepro.sensitivity.schedule.schedule` of the iteration's events) gives.

        A non-blocking collective (DDP's bucket all-reduce) queues on its group's lane behind the ones
        issued before it; operations of two groups in flight at once would share links as flows, which
        this replay does not model: it raises instead."""
        self._works = [[] for _ in plan.tails]
        lanes: dict[Lane, float] = {}  # group -> end of its last non-blocking operation
        ops: list[tuple[Lane, float, float, bool]] = []  # (lane, start, end, non-blocking) of this iteration
        local, t = self._local, self.t
        for step in plan.steps:
            call = step.call
            if call is None:
                raise NotAnalysable(step.error)
            issue: dict[int, float] = {}
            blocking: list[int] = []
            for r, before, blocks in step.members:
                for event in before:
                    local(r, event)
                issue[r] = t[r]
                if blocks:
                    blocking.append(r)
            start, end = self.collective(call, issue, lanes)
            nonblocking = len(blocking) < len(call.ranks)
            if ops and any(g != call.ranks and (a or nonblocking) and s < end and start < e for g, s, e, a in ops):
                raise NotAnalysable("non-blocking collectives of two groups overlap in time (shared links)")
            ops.append((call.ranks, start, end, nonblocking))
            for r in call.ranks:
                if r in blocking:  # VirtualClock.finish_op: idle until start, then communicate to end
                    before_s = t[r]
                    t[r] = start + (end - start)
                    self.slack[r] += t[r] - before_s
                else:
                    self._works[r].append((start, end, issue[r], self.contention[r].tag(issue[r])))
            if nonblocking:
                lanes[call.ranks] = end
            else:
                lanes.pop(call.ranks, None)
        for r, after in enumerate(plan.tails):
            for event in after:
                local(r, event)

    def measured_and_reset(self) -> tuple[float, ...]:
        """Samples per compute-second over the epoch just ended (NaN where nothing ran), as the engine."""
        out = tuple(s / c if c > 0 else math.nan for s, c in zip(self.ep_samples, self.ep_compute, strict=True))
        self.ep_samples = [0] * len(out)
        self.ep_compute = [0.0] * len(out)
        return out


#: per prober, the schedules of its event lists (shared by every simulation of its runs, dropped with it)
_SCHEDULES: weakref.WeakKeyDictionary[Prober, Schedules] = weakref.WeakKeyDictionary()


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
    plans = _SCHEDULES.setdefault(prober, Schedules())
    epoch = 0
    step_end: list[float] = []
    step_samples: list[int] = []
    batches = _batches(job, alloc)
    while True:
        clocks.run(plans(prober.iteration(job.params, batches)))
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
    clocks.run(plans(prober.finalize(job.params)))
    return Timing(max(clocks.t), schedule.samples, len(step_end), schedule.epochs, step_end, step_samples)
