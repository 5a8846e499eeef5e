"""One run replayed at many settings at once: :func:`distrepro.sensitivity.analytic.simulate`, one lane per setting.

Why: the report's hardware check re-times every run at 30-odd settings of the hardware figures, and each replay is
tens of thousands of small Python steps (a compute charge, a collective, a wait) that differ between the settings
only in their numbers. :func:`simulate_lanes` walks those steps once for all the settings of a run, each quantity a
NumPy array with one element (a *lane*) per setting, so the Python overhead of a step is paid once, not per setting.

The arithmetic is :class:`~distrepro.sensitivity.analytic._Clocks`' operation by operation, in the same order, on
float64 (IEEE operations are exact per element, so every lane holds bit for bit what the scalar replay computes);
branches are masks, and Python's ``max`` is :func:`~distrepro.sensitivity.lane_contention.pymax`. What is per setting
and not per step stays Python, lane by lane: the method's allocation at each epoch boundary, the training schedule,
a collective's cost (once per collective; on a noisy link its factor once per seed,
:mod:`~distrepro.sensitivity.lane_noise`). The lanes must follow one control path: the same event lists up to their
sample counts, the same iterations, the same backwards. Where they would not,
:class:`~distrepro.sensitivity.lane_contention.Diverged` is raised (also where the scalar replay raises
:class:`~distrepro.sensitivity.probe.NotAnalysable`), and the caller replays the settings one by one
(:meth:`distrepro.sensitivity.retime.Retimer.prefetch`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from distrepro.job.resolve import Job
from distrepro.sensitivity.analytic import _SCHEDULES, Lane, Timing, _batches
from distrepro.sensitivity.lane_contention import Diverged, LaneLedger, Lanes, Split, pymax
from distrepro.sensitivity.lane_noise import NoisyCharges, distinct
from distrepro.sensitivity.probe import Call, Prober
from distrepro.sensitivity.schedule import Schedule, Schedules
from distrepro.timing import charges, framework
from distrepro.timing.budget_schedule import TrainingSchedule
from distrepro.timing.warmup_profile import emulated_profile

#: a local event with its sample count per lane: ("compute" | "fb", counts), ("piece", (fraction, last)), ("wait", i)
LaneEvent = tuple[str, Any]
#: a collective and its members: (rank, local events before it, whether it blocks)
LaneStep = tuple[Call, tuple[tuple[int, tuple[LaneEvent, ...], bool], ...]]


class _Compute:
    """``ComputeModel.step_seconds`` of every lane's compute model at once."""

    def __init__(self, jobs: Sequence[Job]) -> None:
        models = [j.compute for j in jobs]
        k = jobs[0].world_size
        firsts, which = distinct([id(m.profile) for m in models])  # the figures are the profile's (one workload)
        ones = [models[i] for i in firsts]
        self.declared = [np.array([m.declared_samples_per_s(r) for m in ones])[which] for r in range(k)]
        self.overhead = [np.array([m.overhead_s(r) for m in ones])[which] for r in range(k)]
        self.floor = [np.array([m.floor_s(r) for m in ones])[which] for r in range(k)]
        self.sync = [np.array([m.sync_s(r) for m in ones])[which] for r in range(k)]
        # each GPU's own speed (``noise.gpu_cv``): drawn from the run's hardware seeds, so per lane, not per profile
        self.own = [np.array([m.gpu_speed_factor(r) for m in models]) for r in range(k)]
        self.plain = [
            bool(((o == 0.0) & (f == 0.0) & (s == 0.0)).all())
            for o, f, s in zip(self.overhead, self.floor, self.sync, strict=True)
        ]
        self.changes = [
            [(at[which], f[which]) for at, f in self._changes([m.profile.device(r).speed_changes for m in ones])]
            for r in range(k)
        ]
        # lanes whose noise is one table (one run's seeds) draw once: noise depends on the seeds, never the setting
        drawers, self._which = distinct([id(getattr(m, "table", m)) for m in models])
        self._drawers = [models[i] for i in drawers]

    @staticmethod
    def _changes(per_lane: list[Any]) -> list[tuple[Lanes, Lanes]]:
        """Each lane's speed changes, padded with changes never reached: ``(at_s, factor)`` arrays in order."""
        most = max(len(c) for c in per_lane)
        at = [[c.at_s for c in changes] + [math.inf] * (most - len(changes)) for changes in per_lane]
        factor = [[c.factor for c in changes] + [1.0] * (most - len(changes)) for changes in per_lane]
        return [(np.array([a[i] for a in at]), np.array([f[i] for f in factor])) for i in range(most)]

    def _speed(self, rank: int, at: Lanes) -> Lanes | None:
        """``speed_factor(at_s)`` per lane (the last change at or before it), None when no lane has a change."""
        changes = self.changes[rank]
        if not changes:
            return None
        factor = np.ones_like(at)
        for at_s, f in changes:
            factor = np.where(at_s <= at, f, factor)
        return factor

    def _noise(self, rank: int, step: int) -> Lanes:
        return np.array([m.noise_factor(rank, step) for m in self._drawers])[self._which]

    def step_seconds(self, rank: int, n: Lanes, step: int, at: Lanes) -> Lanes:
        noise, speed = self._noise(rank, step), self._speed(rank, at)
        declared, own = self.declared[rank], self.own[rank]
        plain = n / (declared if speed is None else declared * speed) * own * noise
        if self.plain[rank]:
            return np.where(n == 0, 0.0, plain)
        overhead, floor, sync = self.overhead[rank], self.floor[rank], self.sync[rank]
        base = overhead + n / declared
        gpu = (base if speed is None else base / speed) * own
        fixed = (np.where(floor == 0.0, gpu, pymax(floor, gpu)) + sync) * noise
        return np.where(n == 0, 0.0, np.where((overhead == 0.0) & (floor == 0.0) & (sync == 0.0), plain, fixed))


class _Clocks:
    """:class:`distrepro.sensitivity.analytic._Clocks` over lanes."""

    def __init__(self, jobs: Sequence[Job]) -> None:
        job, lanes = jobs[0], len(jobs)
        k = job.world_size
        self.jobs, self.compute = jobs, _Compute(jobs)
        self.t = [np.zeros(lanes) for _ in range(k)]
        self.slack = [np.zeros(lanes) for _ in range(k)]
        self.grads = [0] * k
        self.ep_samples = np.zeros((k, lanes), dtype=np.int64)
        self.ep_compute = np.zeros((k, lanes))
        self._costs: dict[Call, Lanes] = {}
        self._noisy = NoisyCharges(jobs) if any(j.cost.noisy for j in jobs) else None
        self._profiles = firsts, which = distinct([id(j.profile) for j in jobs])
        profiles = [jobs[i].profile for i in firsts]
        layers = job.workload.layers if job.workload is not None else None
        figures = [framework.costs(p) for p in profiles]
        self._backward = np.array([p.backward_fraction() for p in profiles])[which]
        overhead = framework.bucketed_step_overhead_s
        self._framework = [
            np.array([overhead(p.device(r), layers, f) for p, f in zip(profiles, figures, strict=True)])[which]
            for r in range(k)
        ]
        self._fb: list[list[Lanes] | None] = [None] * k
        self._works: list[list[tuple[Lanes, Lanes, Lanes, int | None]]] = [[] for _ in range(k)]
        contention = np.array([f.contention for f in figures])[which]
        self.contention = [LaneLedger(contention) for _ in range(k)]

    def compute_step(self, rank: int, n: Lanes) -> None:
        some = n > 0
        if np.count_nonzero(some):
            dt = self.compute.step_seconds(rank, n, self.grads[rank], self.t[rank])
            self.t[rank] = np.where(some, self.t[rank] + dt, self.t[rank])
            self.ep_samples[rank] += n
            self.ep_compute[rank] = np.where(some, self.ep_compute[rank] + dt, self.ep_compute[rank])
        self.grads[rank] += 1

    def forward_backward(self, rank: int, n: Lanes) -> None:
        self._fb[rank] = None
        some = np.count_nonzero(n > 0)
        if some:
            if some != len(n):
                raise Diverged("a bucketed backward in some settings only")
            dt = self.compute.step_seconds(rank, n, self.grads[rank], self.t[rank])
            backward = dt * self._backward + self._framework[rank]
            dt = dt + self._framework[rank]
            self.contention[rank].begin(self.t[rank])
            self.t[rank] = self.t[rank] + (dt - backward)
            self._fb[rank] = [dt, backward, dt - backward]
            self.ep_samples[rank] += n
            self.ep_compute[rank] = self.ep_compute[rank] + dt
        self.grads[rank] += 1

    def piece(self, rank: int, fraction: float, last: bool) -> None:
        state = self._fb[rank]
        if state is None:
            return
        dt, backward, done = state
        target = dt if last else dt - backward + backward * fraction
        self.t[rank] = self.t[rank] + pymax(0.0, target - done)
        state[2] = target
        if last:
            self.contention[rank].end(self.t[rank], self.slack[rank])

    def wait(self, rank: int, index: int) -> None:
        start, end, issue, tag = self._works[rank][index]
        t = self.t[rank]
        owed, start, end = self.contention[rank].settle(tag, issue, start, end, t, self.slack[rank])
        t = t + owed
        before = t
        t = np.where(start > t, start, t)
        t = np.where(end > t, t + (end - t), t)
        self.t[rank] = t
        self.slack[rank] = self.slack[rank] + (t - before)

    def _local(self, rank: int, event: LaneEvent) -> None:
        kind, value = event
        if kind == "compute":
            self.compute_step(rank, value)
        elif kind == "fb":
            self.forward_backward(rank, value)
        elif kind == "piece":
            self.piece(rank, *value)
        elif kind == "wait":
            self.wait(rank, value)
        else:
            raise Diverged(f"no replay for event {kind!r}")

    def _cost(self, call: Call, issue: dict[int, Lanes]) -> Lanes:
        if self._noisy is not None:  # every call on a noisy link draws its own factor, in the engine's order
            return self._noisy.seconds(call, issue)
        if call.kind == "parameter_server_async":  # its charge depends on when each member arrived
            return np.array(
                [
                    charges.parameter_server_async(j.cost, call.ranks, call.nbytes * j.bytes_scale,
                                                   [float(issue[r][lane]) for r in call.ranks])[0]
                    for lane, j in enumerate(self.jobs)
                ]
            )  # fmt: skip
        cached = self._costs.get(call)
        if cached is None:  # without noise a charge is the profile's: once per setting
            firsts, which = self._profiles
            cached = np.array([call.seconds(self.jobs[i].cost, self.jobs[i].bytes_scale) for i in firsts])[which]
            self._costs[call] = cached
        return cached

    def collective(self, call: Call, issue: dict[int, Lanes], lanes: dict[Lane, Lanes]) -> tuple[Lanes, Lanes]:
        values = iter(issue.values())
        start = next(values)
        for v in values:
            start = pymax(start, v)
        cost = self._cost(call, issue)
        start = pymax(start, lanes.get(call.ranks, start))
        return start, start + cost

    def run(self, plan: tuple[tuple[LaneStep, ...], tuple[tuple[LaneEvent, ...], ...]]) -> None:
        steps, tails = plan
        self._works = [[] for _ in tails]
        lanes: dict[Lane, Lanes] = {}
        ops: list[tuple[Lane, Lanes, Lanes, bool]] = []
        t = self.t
        for call, members in steps:
            issue: dict[int, Lanes] = {}
            blocking: list[int] = []
            for r, before, blocks in members:
                for event in before:
                    self._local(r, event)
                issue[r] = t[r]
                if blocks:
                    blocking.append(r)
            start, end = self.collective(call, issue, lanes)
            nonblocking = len(blocking) < len(call.ranks)
            for g, s, e, a in ops:
                if g != call.ranks and (a or nonblocking) and np.count_nonzero((s < end) & (start < e)):
                    raise Diverged("non-blocking collectives of two groups overlap in time (shared links)")
            ops.append((call.ranks, start, end, nonblocking))
            for r in call.ranks:
                if r in blocking:
                    before_s = t[r]
                    t[r] = start + (end - start)
                    self.slack[r] = self.slack[r] + (t[r] - before_s)
                else:
                    self._works[r].append((start, end, issue[r], self.contention[r].tag(issue[r])))
            if nonblocking:
                lanes[call.ranks] = end
            else:
                lanes.pop(call.ranks, None)
        for r, after in enumerate(tails):
            for event in after:
                self._local(r, event)

    def latest(self) -> Lanes:
        """``max(clocks.t)`` per lane."""
        top = self.t[0]
        for t in self.t[1:]:
            top = pymax(top, t)
        return top

    def measured_and_reset(self, lanes: list[int]) -> list[tuple[float, ...]]:
        """Each of ``lanes``' samples per compute-second over its epoch, NaN where nothing ran; their counters
        restart. The lanes that ended an epoch at one iteration together: one read of the counters for all of them
        (Chao's method re-splits every epoch, which is every iteration at the proxy scale)."""
        samples, seconds = self.ep_samples[:, lanes].T.tolist(), self.ep_compute[:, lanes].T.tolist()
        self.ep_samples[:, lanes] = 0
        self.ep_compute[:, lanes] = 0.0
        return [
            tuple(s / c if c > 0 else math.nan for s, c in zip(ss, cs, strict=True))
            for ss, cs in zip(samples, seconds, strict=True)
        ]


def _shape(plan: Schedule) -> tuple[Any, ...]:
    """Everything of an iteration but its sample counts: two plans of one shape differ only in those."""

    def events(evs: Sequence[Any]) -> tuple[Any, ...]:
        return tuple((kind, None if kind in ("compute", "fb") else value) for kind, value in evs)

    steps = tuple((s.call, tuple((r, events(b), blocks) for r, b, blocks in s.members)) for s in plan.steps)
    return steps, tuple(events(tail) for tail in plan.tails)


def _lane_events(events: Sequence[Sequence[Any]], which: np.ndarray) -> tuple[LaneEvent, ...]:
    """The events of the distinct plans (one list each, of one shape) with their counts spread over the lanes."""
    out = []
    for parts in zip(*events, strict=True):
        kind, value = parts[0]
        counted = kind in ("compute", "fb")
        out.append((kind, np.array([p[1] for p in parts], dtype=np.int64)[which] if counted else value))
    return tuple(out)


def lane_plan(plans: Sequence[Schedule], which: np.ndarray) -> tuple[tuple[LaneStep, ...], tuple[Any, ...]]:
    """One iteration for all lanes from the distinct plans of their batches (lane i plays ``plans[which[i]]``)."""
    first = plans[0]
    shape = _shape(first) if len(plans) > 1 else None
    if any(s.call is None for s in first.steps) or any(_shape(p) != shape for p in plans[1:]):
        raise Diverged("the settings' iterations differ in more than their sample counts")
    steps: list[LaneStep] = []
    for i, step in enumerate(first.steps):
        assert step.call is not None  # checked above
        members = []
        for j, (r, _, blocks) in enumerate(step.members):
            before = _lane_events([p.steps[i].members[j][1] for p in plans], which)
            members.append((r, before, blocks))
        steps.append((step.call, tuple(members)))
    tails = tuple(_lane_events([p.tails[r] for p in plans], which) for r in range(len(first.tails)))
    return tuple(steps), tails


def _plan(prober: Prober, plans: Schedules, params: Any, batches: list[list[int]], first: bool = False) -> Any:
    """The lanes' iteration for their batches; at the ``first`` iteration, lanes whose iterations have other shapes
    are sent apart (:class:`Split`), as nothing has been replayed yet."""
    keys: dict[tuple[int, ...], int] = {}
    which = np.array([keys.setdefault(tuple(b), len(keys)) for b in batches])
    ones = [plans(prober.iteration(params, list(b))) for b in keys]
    if first and len(ones) > 1:
        shapes: dict[Any, list[int]] = {}
        of_plan = [shapes.setdefault(_shape(p), []) for p in ones]
        if len(shapes) > 1:
            for lane, i in enumerate(which.tolist()):
                of_plan[i].append(lane)
            raise Split(list(shapes.values()))
    return lane_plan(ones, which)


def simulate_lanes(jobs: Sequence[Job], prober: Prober) -> list[Timing]:
    """``[simulate(job, prober) for job in jobs]`` for jobs that are one run of one config and method parameters at
    several settings (or seeds), bit for bit, in one pass; raises :class:`Diverged` where it cannot."""
    with np.errstate(all="ignore"):  # Python floats never warn; lanes a mask leaves out are computed and dropped
        return _simulate(jobs, prober)


def _simulate(jobs: Sequence[Job], prober: Prober) -> list[Timing]:
    job = jobs[0]
    cls, params = job.method.cls, job.params
    if not cls.synchronous or len({j.params.model_dump_json() for j in jobs}) > 1:
        raise Diverged("asynchronous, or the settings change the method's parameters")
    warm = cls.warmup_steps(params)
    profiled = [emulated_profile(j, warm) if warm > 0 else None for j in jobs]
    allocs = [j.allocate(0, profiled=p) for j, p in zip(jobs, profiled, strict=True)]
    budgets = [TrainingSchedule(j.config.budget, j.config.eval, len(j.bundle.train), j.world_size) for j in jobs]
    clocks, plans = _Clocks(jobs), _SCHEDULES.setdefault(prober, Schedules())
    epochs = [0] * len(jobs)
    ends: list[list[float]] = [[] for _ in jobs]
    samples: list[list[int]] = [[] for _ in jobs]
    batches = [_batches(j, a) for j, a in zip(jobs, allocs, strict=True)]
    plan = _plan(prober, plans, params, batches, first=True)
    while True:
        if plan is None:
            plan = _plan(prober, plans, params, batches)
        clocks.run(plan)
        top, crossed = clocks.latest(), []
        for lane, budget in enumerate(budgets):
            budget.record_iteration(sum(batches[lane]), float(top[lane]))
            ends[lane].append(budget.emulated_s)
            samples[lane].append(budget.samples)
            e = budget.epoch_index()
            if e > epochs[lane]:  # the engine's _maybe_reallocate
                epochs[lane] = e
                crossed.append(lane)
        for lane, measured in zip(crossed, clocks.measured_and_reset(crossed) if crossed else (), strict=True):
            new = jobs[lane].allocate(epochs[lane], measured, allocs[lane], profiled[lane])
            if new != allocs[lane]:
                allocs[lane], batches[lane], plan = new, _batches(jobs[lane], new), None
        spent = [b.budget_spent() for b in budgets]
        if all(spent):
            break
        if any(spent):
            raise Diverged("the settings' budgets end at different iterations")
    clocks.run(lane_plan([plans(prober.finalize(params))], np.zeros(len(jobs), dtype=int)))
    top = clocks.latest()
    return [
        Timing(float(top[i]), b.samples, len(ends[i]), b.epochs, ends[i], samples[i]) for i, b in enumerate(budgets)
    ]
