"""The in-process engine: K virtual workers in one process, ordered by virtual time.

Each worker has its own model replica, optimizer state (inside its Method instance), data
stream and virtual clock. Workers run as greenlets under :class:`~suite.engine.scheduler.
Scheduler`; communication is in memory (:mod:`suite.engine.inprocess_comm`). The harness's own
bookkeeping (budget, epoch boundaries, evaluation) happens in zero-cost engine events: for
lockstep methods a rendezvous of all workers after every iteration, for asynchronous methods an
event per gradient step, applied in virtual-time order.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any

import torch

from suite.api import Allocation
from suite.engine.clock import VirtualClock
from suite.engine.common import TargetTracker, make_stream
from suite.engine.inprocess_comm import Fabric
from suite.engine.results import EvalRecord, RunObserver, RunResult, WorkerTotals
from suite.engine.scheduler import Scheduler
from suite.engine.warmup import emulated_profile
from suite.evaluation import average_into, evaluate
from suite.job import Job
from suite.schedule import TrainingSchedule
from suite.streams import iterate_eval
from suite.worker import HarnessWorker


class InProcessEngine:
    name = "inprocess"

    def run(self, job: Job, observer: RunObserver | None = None) -> RunResult:
        return _InProcessRun(job, observer).run()

    def run_cell(self, job: Job, logger: Any, progress: RunObserver | None = None) -> RunResult:
        """Run ``job`` logging to ``logger`` (a :class:`suite.runlog.RunLogger`) as it trains."""
        from suite.observer import Fanout, MlflowObserver

        return self.run(job, Fanout(MlflowObserver(logger) if logger is not None else None, progress))


class _InProcessRun:
    def __init__(self, job: Job, observer: RunObserver | None) -> None:
        self.job = job
        self.observer = observer
        k = job.world_size
        self.clocks = [VirtualClock(r, job.config.timeline_spans_per_worker) for r in range(k)]
        self.sched = Scheduler(self.clocks)
        self.fabric = Fabric(self.sched, job.cost, job.bytes_scale)
        base = job.make_model()
        self.models = [copy.deepcopy(base) for _ in range(k)]
        self.eval_model = copy.deepcopy(base)
        self.workers = [
            HarnessWorker(
                r,
                k,
                self.models[r],
                self.fabric.comms[r],
                self.clocks[r],
                job.compute_seconds,
                job.method_seed_parts,
            )
            for r in range(k)
        ]
        budget = {"unit": job.config.budget.unit, "amount": job.config.budget.amount}
        for w in self.workers:
            w.update_state(budget=budget)
        self.methods = [job.method.cls(job.params) for _ in range(k)]
        self.schedule = TrainingSchedule(job.config.budget, job.config.eval, len(job.bundle.train), k)
        self.evals: list[EvalRecord] = []
        self.allocations: list[tuple[int, Allocation]] = []
        self.epoch = 0
        self.loss_sum = [0.0] * k
        self.loss_count = [0] * k
        self.target = TargetTracker(job.config.target)
        self.wall_start = 0.0
        self.streams: list = []
        self.profiled: tuple[float, ...] | None = None  # warm-up speeds, if the method profiles

    # ------------------------------------------------------------------ data allocation
    def _apply_allocation(self, alloc: Allocation) -> None:
        self.streams = [make_stream(self.job, alloc, self.epoch, r) for r in range(self.job.world_size)]
        self.allocations.append((self.epoch, alloc))
        if self.observer:
            self.observer.on_allocation(self.epoch, alloc)

    def _maybe_reallocate(self) -> None:
        e = self.schedule.epoch_index()
        if e <= self.epoch:
            return
        self.epoch = e
        measured = tuple(w.measured_speed_and_reset() for w in self.workers)
        alloc = self.job.allocate(e, measured, self.allocations[-1][1], self.profiled)
        if alloc != self.allocations[-1][1]:
            self._apply_allocation(alloc)

    # ------------------------------------------------------------------ evaluation
    def _evaluate(self, final: bool = False) -> EvalRecord:
        job = self.job
        if job.method.cls.eval_on == "rank0":
            self.eval_model.load_state_dict(self.models[0].state_dict())
        else:
            average_into(self.eval_model, self.models)
        metrics = evaluate(self.eval_model, iterate_eval(job.bundle, job.config.eval.batch_size))
        count = sum(self.loss_count)
        metrics["train_loss"] = sum(self.loss_sum) / count if count else float("nan")
        self.loss_sum = [0.0] * job.world_size
        self.loss_count = [0] * job.world_size
        s = self.schedule
        records: dict[str, list[float]] = {}
        for w in self.workers:
            for key, v in w.records.items():
                records.setdefault(key, []).append(v)
        rec = EvalRecord(
            step=s.global_step,
            epoch=s.epochs,
            samples=s.samples,
            emulated_s=max(c.t for c in self.clocks) if final else s.emulated_s,
            wall_s=time.perf_counter() - self.wall_start,
            metrics=metrics,
            workers=[WorkerTotals.of(c, self.fabric.bytes_sent[c.rank], self.workers[c.rank]) for c in self.clocks],
            method_records={k: sum(v) / len(v) for k, v in records.items()},
            final=final,
        )
        self.target.update(metrics, rec.emulated_s, rec.step)
        self.evals.append(rec)
        if self.observer:
            self.observer.on_eval(rec)
        return rec

    # ------------------------------------------------------------------ engine events
    def _after_iteration(self, arrivals: dict[int, int]) -> bool:
        s = self.schedule
        s.record_iteration(sum(arrivals.values()), max(c.t for c in self.clocks))
        self._after_progress()
        return s.budget_spent()

    def _after_gradient(self, rank: int, n: int) -> bool:
        self.schedule.record_gradient(n, self.clocks[rank].t)
        self._after_progress()
        return self.schedule.budget_spent()

    def _after_progress(self) -> None:
        s = self.schedule
        if self.job.method.cls.synchronous:
            self._maybe_reallocate()
        for w in self.workers:
            w.update_state(epoch=s.epochs, samples=s.samples)
        if s.eval_due() and not s.budget_spent():
            self._evaluate()
        if self.observer:
            self.observer.on_progress(s.fraction_done(), s.emulated_s)

    # ------------------------------------------------------------------ worker loop
    def _worker_target(self, rank: int) -> Callable[[], None]:
        method, worker, comm = self.methods[rank], self.workers[rank], self.fabric.comms[rank]
        lockstep = self.job.method.cls.synchronous

        def target() -> None:
            method.setup(worker)
            while True:
                batch = self.streams[rank].next_batch()
                worker.clock.step = int(worker.train_state["step"])
                method.train_step(worker, batch)
                worker.update_state(step=worker.train_state["step"] + 1)
                if len(batch):
                    self.loss_sum[rank] += worker.last_loss
                    self.loss_count[rank] += 1
                n = len(batch)
                if lockstep:
                    stop = comm.control(n, self._after_iteration)
                else:
                    stop = comm.event(lambda n=n: self._after_gradient(rank, n), "end-of-step accounting")
                if stop:
                    break
            method.finalize(worker)

        return target

    def run(self) -> RunResult:
        job = self.job
        reason = self.methods[0].skip(job.world_size)
        if reason:
            raise ValueError(f"method {job.method.name} cannot run here: {reason}")
        threads = torch.get_num_threads()
        if job.config.torch_threads:
            torch.set_num_threads(job.config.torch_threads)
        try:
            steps = job.method.cls.warmup_steps(job.params)  # profiling, on the emulated clock
            self.profiled = emulated_profile(job, steps) if steps > 0 else None
            self._apply_allocation(job.allocate(0, profiled=self.profiled))
            self.wall_start = time.perf_counter()
            self.sched.run([self._worker_target(r) for r in range(job.world_size)])
            final = self._evaluate(final=True)
            wall = time.perf_counter() - self.wall_start
        finally:
            torch.set_num_threads(threads)
        spans = [span for c in self.clocks for span in c.spans]
        return RunResult(
            evals=self.evals,
            final=final,
            timeline=spans,
            allocations=self.allocations,
            wall_s=wall,
            emulated_s=final.emulated_s,
            time_to_target_s=self.target.time_s,
            step_to_target=self.target.step,
            models=self.models,
        )
