"""The harness loop: one training loop for every engine.

Everything that decides a run's numbers lives here, once: a worker's step body (batch, step,
loss), the budgets and evaluation points, re-allocation at epoch boundaries, which model is
evaluated (``evaluated_on``), how per-rank values (``ctx.record``, clocks, bytes, losses) become an
evaluation, the run's result and a checkpoint's content. An engine plugs in through
:class:`~distrepro.engine.transport.Transport`: the in-process engine runs all K workers of a
:class:`Harness` as greenlets and its end-of-step bookkeeping as zero-cost scheduler events; the
distributed engine runs one worker per process and the same bookkeeping on every rank. Two
engines used to own a loop each and drifted apart (records logged as a mean in one and as rank 0's
value in the other; ``evaluated_on`` ignored by one for asynchronous methods); one loop cannot drift.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import torch

from distrepro import metrics as M
from distrepro.api.method import Allocation, Method
from distrepro.engine import checkpoint
from distrepro.engine.eval_modes import ReplicaScorer, recalibrate_evaluated, replica_stats
from distrepro.engine.evaluation import evaluate
from distrepro.engine.harness_worker import HarnessWorker
from distrepro.engine.rank_reports import Progress, RankReport, assemble
from distrepro.engine.run_setup import TargetTracker, make_streams
from distrepro.engine.streams import iterate_eval
from distrepro.engine.transport import Transport
from distrepro.engine.worker_slot import Slot
from distrepro.hardware.cluster_layout import cluster_layout
from distrepro.job.observer import RunObserver
from distrepro.job.resolve import Job
from distrepro.job.results import EvalRecord, RunResult
from distrepro.timing import framework
from distrepro.timing.budget_schedule import TrainingSchedule
from distrepro.training.ingredients import LRPlan


class Harness:
    """One run of ``job`` as seen from one process (all workers in-process, one under torch.distributed)."""

    def __init__(
        self,
        job: Job,
        transport: Transport,
        observer: RunObserver | None = None,
        checkpoint_root: Path | None = None,
        resume_from: Path | None = None,
    ) -> None:
        self.job, self.transport, self.observer = job, transport, observer
        self.checkpoint_root, self.resume_from = checkpoint_root, resume_from
        cls = job.method.cls
        self.lockstep = cls.synchronous
        k = job.world_size
        self.slots: list[Slot] = []
        layout = cluster_layout(job.profile)
        figures = framework.costs(job.profile)
        for rank in transport.ranks:
            model, comm, clock = transport.endpoint(rank)
            worker = HarnessWorker(
                rank,
                k,
                model,
                comm,
                clock,
                job.compute_seconds,
                job.method_seed_parts,
                device=transport.device,
                bytes_scale=job.bytes_scale,
                backward_fraction=job.profile.backward_fraction(),
                cluster=layout,
                layers=job.workload.layers if job.workload is not None else None,
                framework_s=framework.bucketed_step_overhead_s(
                    job.profile.device(rank), job.workload.layers if job.workload is not None else None, figures
                ),
                contention=figures.contention,
            )
            worker.update_state(budget=job.config.budget)
            worker.total_steps = job.lr_plan.total_steps
            worker.lr_schedule = job.lr_plan.schedule
            worker.label_smoothing = job.config.loss.label_smoothing
            worker.optimizer_override = job.config.optimizer
            self.slots.append(Slot(rank, worker, cls(job.params)))
        if job.config.eval.replicas:
            scorer = ReplicaScorer(job.bundle, job.config.eval.batch_size)
            for slot in self.slots:
                slot.score_replica = scorer
        self.schedule = TrainingSchedule(job.config.budget, job.config.eval, len(job.bundle.train), k)
        self.target = TargetTracker(job.config.target)
        self.evals: list[EvalRecord] = []
        self.allocations: list[tuple[int, Allocation]] = []
        self.alloc: Allocation | None = None
        self.epoch = 0
        self.profiled: tuple[float, ...] | None = None  # warm-up speeds, if the method profiles
        self.lr_plan: LRPlan = job.lr_plan
        transport.bind(self)

    @property
    def models(self) -> list[torch.nn.Module]:
        return [slot.worker.model for slot in self.slots]

    # ------------------------------------------------------------------ run
    def run(self) -> RunResult | None:
        """Train to the budget, evaluate, and return the result (None on processes that do not report)."""
        job, transport = self.job, self.transport
        method = self.slots[0].method
        reason = method.skip(cluster_layout(job.profile))
        if reason:
            raise ValueError(f"method {job.method.name} cannot run here: {reason}")
        with transport.running():
            transport.prepare(lambda: job.allocate(0))
            steps = job.method.cls.warmup_steps(job.params)  # profiling, before the first allocation
            self.profiled = transport.profile(steps) if steps > 0 else None
            self._set_allocation(job.allocate(0, profiled=self.profiled))
            transport.run_workers(self._work)
            self.evaluate(final=True)
            timeline = transport.timeline([span for slot in self.slots for span in slot.worker.clock.spans])
        if not transport.reporter:
            return None
        final = self.evals[-1]
        return RunResult(
            evals=self.evals,
            final=final,
            timeline=timeline,
            allocations=self.allocations,
            wall_s=transport.wall_s(),
            emulated_s=final.emulated_s,
            time_to_target_s=self.target.time_s,
            step_to_target=self.target.step,
            models=self.models,
        )

    def _work(self, slot: Slot) -> None:
        """One worker's life, the same under every engine: setup, steps until the budget, finalize."""
        method, worker, transport = slot.method, slot.worker, self.transport
        method.setup(worker)
        if self.resume_from is not None:
            self._resume(slot, self.resume_from)
        transport.started(slot)
        cfg = self.job.config.checkpoint
        every = cfg.every_steps if self.lockstep and self.checkpoint_root is not None else None
        while True:
            assert slot.stream is not None
            batch = slot.stream.next_batch()
            step = int(worker.train_state["step"])
            worker.clock.step = step
            self.lr_plan.begin_step(worker, step)  # a worker's own step count: engine-independent, async too
            method.train_step(worker, batch)
            worker.update_state(step=step + 1)
            n = len(batch)
            if n:
                slot.loss_sum += worker.last_loss
                slot.loss_count += 1
            if self.lockstep:
                stop = transport.rendezvous(slot, n, self._iteration_done)
            else:
                stop = transport.in_order(slot, partial(self._gradient_done, slot, n))
            if every and not stop and (step + 1) % every == 0:
                assert self.checkpoint_root is not None
                checkpoint.save(self, slot, self.checkpoint_root, step + 1, transport.barrier, cfg.keep)
            if stop:
                break
        method.finalize(worker)
        transport.finished(slot)

    def _resume(self, slot: Slot, folder: Path) -> None:
        if not self.lockstep:
            raise ValueError("asynchronous methods cannot be resumed from a checkpoint")
        checkpoint.load(self, slot, folder)

    # ------------------------------------------------------------------ bookkeeping
    def _iteration_done(self, samples: int, emulated_s: float) -> bool:
        """A lockstep iteration ended (``samples`` over all workers); True when the budget is spent."""
        self.schedule.record_iteration(samples, emulated_s)
        return self._after_progress()

    def _gradient_done(self, slot: Slot, samples: int) -> bool:
        """An asynchronous worker finished a step; True when the budget is spent."""
        self.transport.count_gradient(self.schedule, samples, slot.worker.clock.t)
        return self._after_progress()

    def _after_progress(self) -> bool:
        s = self.schedule
        if self.lockstep:
            self._maybe_reallocate()
        for slot in self.slots:
            slot.worker.update_state(epoch=s.epochs, samples=s.samples)
        if s.eval_due() and not s.budget_spent():
            self.evaluate(final=False)
        if self.observer:
            self.observer.on_progress(s.fraction_done(), s.emulated_s)
        return s.budget_spent()

    # ------------------------------------------------------------------ data allocation
    def _set_allocation(self, alloc: Allocation) -> None:
        self.alloc = alloc
        streams = make_streams(self.job, alloc, self.epoch, [slot.rank for slot in self.slots])
        for slot, stream in zip(self.slots, streams, strict=True):
            slot.stream = stream
        self.allocations.append((self.epoch, alloc))
        if self.observer:
            self.observer.on_allocation(self.epoch, alloc)

    def _maybe_reallocate(self) -> None:
        """Lockstep methods re-allocate at every epoch boundary from the speeds measured over the last epoch."""
        e = self.schedule.epoch_index()
        if e <= self.epoch:
            return
        self.epoch = e
        cls = self.job.method.cls
        if cls.allocate.__func__ is Method.allocate.__func__:  # type: ignore[attr-defined]
            return  # the default allocation ignores measured speeds: nothing to gather
        measured = tuple(self.transport.gather([slot.worker.measured_speed_and_reset() for slot in self.slots]))
        alloc = self.job.allocate(e, measured, self.alloc, self.profiled)
        if alloc != self.alloc:
            self._set_allocation(alloc)

    # ------------------------------------------------------------------ evaluation
    def progress(self) -> Progress:
        """Where training is, as this process sees it."""
        s, t = self.schedule, self.transport
        return Progress(s.global_step, s.epochs, s.samples, s.gradients, s.emulated_s, t.wall_s(), t.throttled_s())

    def evaluate(self, final: bool) -> None:
        """Untimed evaluation of the model ``evaluated_on`` names, with every rank's report."""
        progress = self.progress()
        reports = [slot.report(progress) for slot in self.slots]
        cls, params = self.job.method.cls, self.job.params
        kinds = tuple(self.job.profile.device(r).kind for r in range(self.job.world_size))
        members = cls.trained_ranks(params, kinds)
        self.transport.evaluate(self.models, reports, cls.evaluated_on(params), final, final or self.lockstep, members)

    def evaluated(self, model: torch.nn.Module, reports: list[RankReport], final: bool, consensus: float) -> None:
        """Called by the transport on the reporting process: score ``model`` (the one ``evaluated_on``
        names) and log the evaluation assembled from every rank's report, with the replicas'
        ``consensus`` distance (:func:`distrepro.engine.evaluation.consensus_distance`, untimed) and the
        evaluation modes of the config (:mod:`distrepro.engine.eval_modes`)."""
        assert self.alloc is not None
        recalibrate_evaluated(model, self.job, self.alloc.batch_sizes)
        metrics = evaluate(model, iterate_eval(self.job.bundle, self.job.config.eval.batch_size))
        metrics[M.CONSENSUS_DISTANCE] = max(consensus, 0.0)
        if self.job.config.eval.replicas:
            ranked = sorted(reports, key=lambda r: r.totals.rank)
            metrics.update(replica_stats([r.replica for r in ranked]))
        rec = assemble(reports, metrics, final, self.lockstep)
        lr = self.lr_plan.lr(max(rec.step - 1, 0))
        if lr is not None:  # the schedule's LR of the last step taken (asynchronous: of that many steps)
            rec.metrics[M.LR] = lr
        self.target.update(rec.metrics, rec.emulated_s, rec.step)
        self.evals.append(rec)
        if self.observer:
            self.observer.on_eval(rec)
