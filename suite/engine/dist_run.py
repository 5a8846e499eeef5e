"""One rank's training loop under torch.distributed.

The same loop as the in-process engine, seen from one worker: the method code is identical; the
harness's bookkeeping is computed locally where every rank can (global samples per lockstep
iteration follow from the allocation all ranks share) and with uncharged control collectives
where it must (evaluation, measured speeds, emulated-time budgets). Asynchronous methods count
global progress through atomic counters in the c10d store.
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from suite.api import Allocation, Method
from suite.engine import checkpoint
from suite.engine.clock import VirtualClock
from suite.engine.common import TargetTracker, make_stream
from suite.engine.dist_comm import DistComm
from suite.engine.pacing import Pacer, choose_dilation
from suite.engine.pairing import PairingClient, PairingCoordinator
from suite.engine.results import EvalRecord, RunObserver, RunResult, WorkerTotals
from suite.engine.warmup import emulated_profile, timed_speed
from suite.evaluation import evaluate
from suite.job import Job
from suite.partition import shard_sizes
from suite.schedule import TrainingSchedule
from suite.streams import iterate_eval
from suite.worker import HarnessWorker


def _tensor(values: list[float], device: torch.device) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64, device=device)


def _flat_state(model: torch.nn.Module) -> torch.Tensor:
    """Floating parameters and buffers as one float64 vector (state_dict order)."""
    return torch.cat([t.detach().reshape(-1).double() for t in model.state_dict().values() if t.is_floating_point()])


class DistRun:
    """Rank ``rank``'s share of one job; rank 0 also evaluates and reports to ``observer``."""

    def __init__(
        self,
        job: Job,
        rank: int,
        store: Any,
        observer: RunObserver | None = None,
        checkpoint_root: Path | None = None,
        resume_from: Path | None = None,
    ) -> None:
        self.job, self.rank, self.store, self.observer = job, rank, store, observer
        self.checkpoint_root, self.resume_from = checkpoint_root, resume_from
        k = job.world_size
        # training collectives get the short timeout (a hung rank fails the run); the default group
        # keeps the long start-up one
        dist.barrier()  # on the default group (start-up timeout): everyone is here before the short clock starts
        self.pg = dist.new_group(list(range(k)), timeout=timedelta(seconds=job.config.dist.timeout_s))
        self.clock = VirtualClock(rank, job.config.timeline_spans_per_worker)
        # NCCL carries only CUDA tensors: model, control tensors and buffers go to this rank's GPU
        nccl = dist.get_backend() == "nccl"
        self.device = torch.device("cuda", torch.cuda.current_device()) if nccl else torch.device("cpu")
        self.pacer: Pacer | None = None
        self.pairing: PairingClient | None = None
        self.coordinator: PairingCoordinator | None = None
        timeout = job.config.dist.timeout_s
        if not job.method.cls.synchronous:
            self.pairing = PairingClient(store, rank, timeout)
            if rank == 0:
                self.coordinator = PairingCoordinator(store, k, timeout)
        self.comm = DistComm(
            rank,
            k,
            self.clock,
            job.cost,
            job.bytes_scale,
            pairing=self.pairing,
            pace=self._pace,
            group=self.pg,
            timeout=timedelta(seconds=job.config.dist.timeout_s),
        )
        self.model = job.make_model().to(self.device)
        self.eval_model = job.make_model()  # rank 0 evaluates on the CPU
        self.worker = HarnessWorker(
            rank, k, self.model, self.comm, self.clock, self._charge, job.method_seed_parts, device=self.device
        )
        self.worker.update_state(budget={"unit": job.config.budget.unit, "amount": job.config.budget.amount})
        self.method = job.method.cls(job.params)
        self.schedule = TrainingSchedule(job.config.budget, job.config.eval, len(job.bundle.train), k)
        self.target = TargetTracker(job.config.target)
        self.evals: list[EvalRecord] = []
        self.allocations: list[tuple[int, Allocation]] = []
        self.epoch = 0
        self.profiled: tuple[float, ...] | None = None  # warm-up speeds, if the method profiles
        self.loss_sum, self.loss_count = 0.0, 0
        self.needs_clock_sync = (
            job.config.budget.unit == "emulated_seconds" or job.config.eval.every_emulated_seconds is not None
        )

    # ------------------------------------------------------------------ time
    def _charge(self, rank: int, n: int, step: int, at_s: float) -> float:
        return self.job.compute_seconds(rank, n, step, at_s)

    def _pace(self, virtual_t: float) -> None:
        if self.pacer is not None:
            self.pacer(virtual_t)

    def _calibrate(self, alloc: Allocation) -> float:
        """Real/virtual ratio of this rank's compute and of a gradient all-reduce; agreed max × margin."""
        cfg = self.job.config.throttle
        if cfg.dilation is not None:
            return cfg.dilation
        # a fresh stream: calibrating must not consume the training data order
        batch = make_stream(self.job, alloc, self.epoch, self.rank).next_batch()
        probe = self.job.make_model()
        ratios = [0.0]
        if len(batch):
            real = []
            for _ in range(cfg.calibration_steps + 1):
                t = time.perf_counter()
                probe.zero_grad()
                torch.nn.functional.cross_entropy(probe(batch.inputs), batch.targets).backward()
                real.append(time.perf_counter() - t)
            virtual = len(batch) / self.job.compute.samples_per_s(self.rank, 0.0)
            ratios.append(sorted(real[1:])[len(real[1:]) // 2] / virtual)
        grads = torch.cat([p.detach().reshape(-1) for p in probe.parameters()])
        dist.barrier(group=self.pg)  # time the collective itself, not the wait for ranks still starting up
        real_comm = []
        for _ in range(cfg.calibration_steps + 1):
            t = time.perf_counter()
            dist.all_reduce(grads, group=self.pg)
            real_comm.append(time.perf_counter() - t)
        real_comm_s = sorted(real_comm[1:])[len(real_comm[1:]) // 2]
        virtual_comm = self.job.cost.ring_all_reduce(
            list(range(self.job.world_size)), grads.numel() * 4 * self.job.bytes_scale
        )
        if virtual_comm > 0:
            ratios.append(real_comm_s / virtual_comm)
        mine = {"compute_ratio": ratios[1] if len(ratios) > 2 else 0.0, "comm_ratio": ratios[-1]}
        every: list[Any] = [None] * self.job.world_size
        dist.all_gather_object(every, mine, group=self.pg)
        # the calibration of every rank (the dilation is set by the largest ratio, on any rank)
        self.calibration = {key: max(c[key] for c in every) for key in ("compute_ratio", "comm_ratio")} | {
            "per_rank": every
        }
        return choose_dilation([c[k] for c in every for k in ("compute_ratio", "comm_ratio")], cfg.margin)

    def _profile(self, steps: int) -> tuple[float, ...]:
        """Warm-up speeds of every rank: timed real passes when wall time follows the emulated
        devices (throttled), gathered; else the virtual clock's, which every rank computes alike."""
        if self.pacer is None:
            return emulated_profile(self.job, steps)
        mine = timed_speed(self.job, self.rank, steps, self.device, self.pacer.dilation)
        every: list[Any] = [None] * self.job.world_size
        dist.all_gather_object(every, mine, group=self.pg)
        return tuple(every)

    # ------------------------------------------------------------------ data
    def _set_allocation(self, alloc: Allocation) -> None:
        self.alloc = alloc
        self.stream = make_stream(self.job, alloc, self.epoch, self.rank)
        sizes = shard_sizes(len(self.job.bundle.train), alloc.shares) if alloc.partition == "iid_shards" else None
        self.samples_per_iteration = sum(
            b for r, b in enumerate(alloc.batch_sizes) if b > 0 and (sizes is None or sizes[r] > 0)
        )
        self.allocations.append((self.epoch, alloc))
        if self.observer:
            self.observer.on_allocation(self.epoch, alloc)

    def _maybe_reallocate(self) -> None:
        e = self.schedule.epoch_index()
        if e <= self.epoch:
            return
        self.epoch = e
        if type(self.method).allocate.__func__ is Method.allocate.__func__:  # type: ignore[attr-defined]
            return  # the default allocation ignores measured speeds: no gather needed
        measured: list[Any] = [None] * self.job.world_size
        dist.all_gather_object(measured, self.worker.measured_speed_and_reset(), group=self.pg)
        alloc = self.job.allocate(e, tuple(measured), self.alloc, self.profiled)
        if alloc != self.alloc:
            self._set_allocation(alloc)

    # ------------------------------------------------------------------ evaluation
    def _totals(self, collective: bool) -> list[WorkerTotals]:
        mine = WorkerTotals.of(self.clock, self.comm.bytes_sent, self.worker)
        if not collective:
            return [mine]
        out: list[Any] = [None] * self.job.world_size
        dist.all_gather_object(out, mine, group=self.pg)
        return out

    def _evaluate(self, final: bool, collective: bool) -> None:
        """Untimed evaluation; under throttling the wall time it takes is taken out of the pacing."""
        started = time.perf_counter()
        throttled = self.pacer.throttled_s() if self.pacer else None
        try:
            self._evaluate_now(final, collective, throttled)
        finally:
            if collective:
                dist.barrier(group=self.pg)  # everyone resumes together, after rank 0's evaluation
            if self.pacer is not None:
                self.pacer.shift(time.perf_counter() - started)

    def _evaluate_now(self, final: bool, collective: bool, throttled: float | None) -> None:
        """Collective: average all replicas (uncharged) and evaluate on rank 0; else rank 0's replica."""
        flat = _flat_state(self.model)
        losses = _tensor([self.loss_sum, float(self.loss_count)], self.device)
        if collective:
            dist.reduce(flat, dst=0, group=self.pg)
            dist.reduce(losses, dst=0, group=self.pg)
            clock = _tensor([self.clock.t], self.device)
            dist.all_reduce(clock, op=dist.ReduceOp.MAX, group=self.pg)
            totals = self._totals(True)
        else:  # asynchronous methods: rank 0 alone, on its own replica
            clock = _tensor([self.clock.t], self.device)
            totals = self._totals(False)
        self.loss_sum, self.loss_count = 0.0, 0
        if self.rank != 0:
            return
        state = self.eval_model.state_dict()
        avg = (flat / self.job.world_size if collective else flat).cpu()
        offset = 0
        for key, value in state.items():
            if value.is_floating_point():
                n = value.numel()
                state[key] = avg[offset : offset + n].view_as(value).to(value.dtype)
                offset += n
        self.eval_model.load_state_dict(state)
        metrics = evaluate(self.eval_model, iterate_eval(self.job.bundle, self.job.config.eval.batch_size))
        metrics["train_loss"] = float(losses[0] / losses[1]) if losses[1] > 0 else float("nan")
        emulated = float(clock) if (final or self.needs_clock_sync or collective) else self.schedule.emulated_s
        rec = EvalRecord(
            step=self.schedule.global_step,
            epoch=self.schedule.epochs,
            samples=self.schedule.samples,
            emulated_s=emulated,
            wall_s=self._wall(),
            metrics=metrics,
            workers=totals,
            method_records=dict(self.worker.records),
            final=final,
            throttled_s=throttled,
        )
        self.target.update(metrics, rec.emulated_s, rec.step)
        self.evals.append(rec)
        if self.observer:
            self.observer.on_eval(rec)

    def _wall(self) -> float:
        return time.perf_counter() - self.wall_start

    # ------------------------------------------------------------------ loop
    def _after_step(self, n: int) -> bool:
        s = self.schedule
        if self.job.method.cls.synchronous:
            emulated = self.clock.t
            if self.needs_clock_sync:
                t = _tensor([self.clock.t], self.device)
                dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.pg)
                emulated = float(t)
            s.record_iteration(self.samples_per_iteration, emulated)
            self._maybe_reallocate()
            if s.eval_due() and not s.budget_spent():
                self._evaluate(final=False, collective=True)
        else:
            s.gradients = int(self.store.add("progress/gradients", 1))
            s.samples = int(self.store.add("progress/samples", n))
            s.steps = s.gradients / self.job.world_size
            s.emulated_s = max(s.emulated_s, self.clock.t)
            if s.eval_due() and not s.budget_spent() and self.rank == 0:
                self._evaluate(final=False, collective=False)
        self.worker.update_state(epoch=s.epochs, samples=s.samples)
        if self.observer:
            self.observer.on_progress(s.fraction_done(), s.emulated_s)
        if self.job.config.budget.unit == "emulated_seconds" and not self.job.method.cls.synchronous:
            return self.clock.t >= self.job.config.budget.amount
        return s.budget_spent()

    def run(self) -> RunResult | None:
        job = self.job
        reason = self.method.skip(job.world_size)
        if reason:
            raise ValueError(f"method {job.method.name} cannot run here: {reason}")
        alloc = job.allocate(0)
        if job.config.throttle.enabled:
            self.pacer = Pacer(self._calibrate(alloc))
            self.worker.pacer = self.pacer
        steps = job.method.cls.warmup_steps(job.params)
        if steps > 0:  # profile every device, then allocate from what was measured
            self.profiled = self._profile(steps)
            alloc = job.allocate(0, profiled=self.profiled)
        self._set_allocation(alloc)
        if self.coordinator is not None:
            self.coordinator.start()
        self.method.setup(self.worker)
        if self.resume_from is not None:
            if not job.method.cls.synchronous:
                raise ValueError("asynchronous methods cannot be resumed from a checkpoint")
            checkpoint.load(self, self.resume_from)
        every = job.config.checkpoint.every_steps if job.method.cls.synchronous else None
        dist.barrier(group=self.pg)
        self.wall_start = time.perf_counter()
        if self.pacer is not None:
            self.pacer.start()
            self.pacer.t0 -= self.pacer.dilation * self.clock.t  # a resumed run continues its timeline
        while True:
            batch = self.stream.next_batch()
            self.clock.step = int(self.worker.train_state["step"])
            self.method.train_step(self.worker, batch)
            self.worker.update_state(step=self.worker.train_state["step"] + 1)
            if len(batch):
                self.loss_sum += self.worker.last_loss
                self.loss_count += 1
            stop = self._after_step(len(batch))
            step = int(self.worker.train_state["step"])
            if every and self.checkpoint_root is not None and not stop and step % every == 0:
                checkpoint.save(
                    self, self.checkpoint_root, step, lambda: dist.barrier(group=self.pg), job.config.checkpoint.keep
                )
            if stop:
                break
        self.method.finalize(self.worker)
        if self.pairing is not None:
            self.pairing.done()
        if self.coordinator is not None:
            self.coordinator.join(job.config.dist.timeout_s)
        dist.barrier(group=self.pg)
        self._evaluate(final=True, collective=True)
        spans: list[Any] = [None] * job.world_size
        dist.all_gather_object(spans, self.clock.spans, group=self.pg)
        if self.rank != 0:
            return None
        final = self.evals[-1]
        return RunResult(
            evals=self.evals,
            final=final,
            timeline=[s for per in spans for s in per],
            allocations=self.allocations,
            wall_s=self._wall(),
            emulated_s=final.emulated_s,
            time_to_target_s=self.target.time_s,
            step_to_target=self.target.step,
            models=[self.model],
        )


def store_of_default_group() -> Any:
    """The c10d store of the default process group, under a prefix of our own."""
    from torch.distributed import distributed_c10d as c10d

    return dist.PrefixStore("distrepro/", c10d._get_default_store())
