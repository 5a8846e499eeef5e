"""The in-process engine: K virtual workers in one process, ordered by virtual time.

Each worker has its own model replica, optimizer state (inside its Method instance), data
stream and virtual clock. The training loop is the harness's (:mod:`distrepro.engine.loop`); this
engine is its transport: every worker's loop runs as a greenlet under :class:`~distrepro.engine.
scheduler.Scheduler`, communication is in memory (:mod:`distrepro.engine.inprocess.comm`), and the
loop's end-of-step bookkeeping happens in zero-cost engine events: for lockstep methods once per
iteration, when the last worker has arrived at the rendezvous; for asynchronous methods once per
gradient step, applied in virtual-time order. Every per-rank value is already in this process,
so gathering is free and evaluating the average of all replicas is a local computation.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, Literal

import torch

from distrepro.api.method import Allocation, Comm
from distrepro.engine.clock import VirtualClock
from distrepro.engine.evaluation import average_into, consensus_distance
from distrepro.engine.inprocess.batching import ReplicaBatcher, check_mode
from distrepro.engine.inprocess.comm import Fabric
from distrepro.engine.inprocess.scheduler import Scheduler
from distrepro.engine.inprocess.watchdog import Watchdog
from distrepro.engine.loop import Harness
from distrepro.engine.rank_reports import RankReport
from distrepro.engine.torch_threads import resolve_threads
from distrepro.engine.transport import HarnessView
from distrepro.engine.worker_slot import Slot
from distrepro.errors import WorkerFailure
from distrepro.hardware.device import describe, deterministic_cuda, resolve_device, seeded_global_rng
from distrepro.job.engine import RunSink
from distrepro.job.observer import Fanout, RunObserver
from distrepro.job.resolve import Job
from distrepro.job.results import RunResult, Span
from distrepro.timing.budget_schedule import TrainingSchedule
from distrepro.timing.warmup_profile import emulated_profile


class InProcessEngine:
    name = "inprocess"

    def harness(self, job: Job, observer: RunObserver | None = None) -> Harness:
        """The run of ``job`` on this engine, before it starts (tests inspect its slots)."""
        return Harness(job, InProcessTransport(job), observer)

    def run(self, job: Job, observer: RunObserver | None = None) -> RunResult:
        result = self.harness(job, observer).run()
        assert result is not None  # the only process reports
        return result

    def run_cell(
        self,
        job: Job,
        sink: RunSink | None,
        progress: RunObserver | None = None,
        resume_from: Path | None = None,
    ) -> RunResult:
        """Run ``job`` recording into ``sink`` (the cell's run) as it trains.

        The in-process engine resumes a cell by training it again (it is deterministic), so ``resume_from`` must be
        ``None``: campaigns hand a checkpoint only to an engine that writes them (:mod:`distrepro.engine.checkpoint`).
        """
        if resume_from is not None:
            raise ValueError("the in-process engine does not continue from a checkpoint folder")
        device = resolve_device(job.config.device, job.source)
        if sink is not None:  # what ``device: auto`` got, and the GPU's name
            sink.set_tags({"distrepro.device": describe(device)})
        result = self.run(job, Fanout(sink.observer() if sink is not None else None, progress))
        if device.type != "cpu":  # a cell's result may be pickled to another process (--jobs): no GPU tensors in it
            result.models = [m.cpu() for m in result.models]
        return result


class InProcessTransport:
    """All K workers in this process: greenlets, an in-memory fabric, engine events in virtual-time order."""

    reporter = True

    def __init__(self, job: Job) -> None:
        self.job = job
        k = job.world_size
        self.ranks = range(k)
        #: the config's ``device`` (:mod:`distrepro.hardware.device`): every replica, the evaluated model and the
        #: batches live there; the clocks, the fabric's bookkeeping and every random stream stay on the CPU
        self.device = resolve_device(job.config.device, job.source)
        self.clocks = [VirtualClock(r, job.config.timeline_spans_per_worker) for r in range(k)]
        self.sched = Scheduler(self.clocks)
        self.watchdog = Watchdog(job.config.dist.timeout_s)
        self.fabric = Fabric(self.sched, job.cost, job.bytes_scale)
        base = job.make_model().to(self.device)  # built on the CPU from the seed, then moved: the same initial model
        self.models = [copy.deepcopy(base) for _ in range(k)]
        self.eval_model = copy.deepcopy(base)
        #: the forward/backward of workers released together, batched (``batched_replicas``); None: one at a time
        self.batcher = (
            ReplicaBatcher(self.sched, self.models) if check_mode(job.config.batched_replicas, base) else None
        )
        self.wall_start = time.perf_counter()

    def bind(self, harness: HarnessView) -> None:
        self.harness = harness
        for slot in harness.slots:
            slot.worker.batcher = self.batcher

    def endpoint(self, rank: int) -> tuple[torch.nn.Module, Comm, VirtualClock]:
        return self.models[rank], self.fabric.comms[rank], self.clocks[rank]

    @contextmanager
    def running(self) -> Iterator[None]:
        threads = torch.get_num_threads()
        torch.set_num_threads(resolve_threads(self.job.config.torch_threads)[0])
        try:
            with deterministic_cuda(self.device), seeded_global_rng(self.device, *self.job.seed_parts):
                yield
        finally:
            torch.set_num_threads(threads)

    def prepare(self, first_allocation: Callable[[], Allocation]) -> None:
        pass  # nothing to calibrate: time is the virtual clock's only

    def profile(self, steps: int) -> tuple[float, ...]:
        return emulated_profile(self.job, steps)

    # ------------------------------------------------------------------ scheduling
    def run_workers(self, body: Callable[[Slot], None]) -> None:
        self.wall_start = time.perf_counter()
        with self.watchdog.armed():  # a method that blocks fails the cell after dist.timeout_s without progress
            self.sched.run([partial(body, slot) for slot in self.harness.slots])
        if not self.harness.schedule.budget_spent():  # every worker returned, yet the budget is not spent
            raise WorkerFailure(0, "the workers returned before the budget completed; the run is not finished")

    def started(self, slot: Slot) -> None:
        pass

    def finished(self, slot: Slot) -> None:
        pass

    def rendezvous(self, slot: Slot, samples: int, then: Callable[[int, float], bool]) -> bool:
        self.watchdog.beat()  # a worker finished a step: progress

        def iteration(arrivals: dict[int, int]) -> bool:  # runs once, when the last worker has arrived
            return then(sum(arrivals.values()), max(c.t for c in self.clocks))

        return self.fabric.comms[slot.rank].control(samples, iteration)

    def in_order(self, slot: Slot, then: Callable[[], bool]) -> bool:
        self.watchdog.beat()
        return self.fabric.comms[slot.rank].event(then, "end-of-step accounting")

    def count_gradient(self, schedule: TrainingSchedule, samples: int, clock_s: float) -> None:
        schedule.record_gradient(samples, clock_s)  # events arrive in virtual-time order

    # ------------------------------------------------------------------ meeting
    def gather(self, values: list[Any]) -> list[Any]:
        return list(values)  # one value per slot, and every rank has a slot here

    def barrier(self) -> None:
        raise NotImplementedError("the in-process engine does not write checkpoints")

    def evaluate(
        self,
        models: list[torch.nn.Module],
        reports: list[RankReport],
        eval_on: Literal["average", "rank0"],
        final: bool,
        blocking: bool,
        members: tuple[int, ...] | None = None,
    ) -> None:
        with self.watchdog.paused():  # untimed, and long on real data: not a lack of progress
            if eval_on == "rank0":
                self.eval_model.load_state_dict(models[0].state_dict())
            else:
                average_into(self.eval_model, models)
            trained = models if members is None else [models[r] for r in members]
            self.harness.evaluated(self.eval_model, reports, final, consensus_distance(trained))

    # ------------------------------------------------------------------ time
    def wall_s(self) -> float:
        return time.perf_counter() - self.wall_start

    def throttled_s(self) -> float | None:
        return None

    def timeline(self, local: list[Span]) -> list[Span]:
        return local
