"""One rank of the distributed engine: the harness loop on a torch.distributed transport.

The training loop is the harness's (:mod:`distrepro.engine.loop`), seen from one worker; this module
is its transport. Bookkeeping is computed locally where every rank can (global samples per
lockstep iteration follow from the allocation all ranks share) and with uncharged control
collectives where it must (evaluation, measured speeds, emulated-time budgets). Asynchronous
methods count global progress through atomic counters in the c10d store and evaluate without a
common step (:mod:`distrepro.engine.multiprocess.evals`). Throttling paces every rank against its virtual clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

import torch
import torch.distributed as dist

from distrepro.api.method import Allocation, Comm
from distrepro.engine.clock import VirtualClock
from distrepro.engine.evaluation import param_mask, param_vector
from distrepro.engine.loop import Harness
from distrepro.engine.multiprocess.comm import DistComm
from distrepro.engine.multiprocess.evals import AsyncEvals, flat_state, load_flat
from distrepro.engine.multiprocess.pacing import Pacer, choose_dilation
from distrepro.engine.multiprocess.pairing import PairingClient, PairingCoordinator
from distrepro.engine.rank_reports import RankReport
from distrepro.engine.run_setup import make_stream
from distrepro.engine.transport import HarnessView
from distrepro.engine.warmup import timed_speed
from distrepro.engine.worker_slot import Slot
from distrepro.errors import ConfigError
from distrepro.hardware.device import seeded_global_rng
from distrepro.job.observer import RunObserver
from distrepro.job.resolve import Job
from distrepro.job.results import RunResult, Span
from distrepro.timing.budget_schedule import TrainingSchedule
from distrepro.timing.warmup_profile import emulated_profile
from distrepro.training.partition import shard_sizes


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
        self.transport = DistTransport(job, rank, store)
        self.harness = Harness(job, self.transport, observer, checkpoint_root, resume_from)

    @property
    def pacer(self) -> Pacer | None:
        return self.transport.pacer

    @property
    def calibration(self) -> dict[str, Any]:
        return self.transport.calibration

    def run(self) -> RunResult | None:
        """Train; rank 0 returns the result (with every rank's pacing, when throttled), the other ranks None."""
        result = self.harness.run()
        if result is not None:
            result.pacing = self.transport.pacing
        return result


class DistTransport:
    """This process's one worker, real collectives, store counters, pacing."""

    def __init__(self, job: Job, rank: int, store: Any) -> None:
        self.job, self.rank, self.store = job, rank, store
        k = job.world_size
        self.ranks = (rank,)
        self.reporter = rank == 0
        # training collectives get the short timeout (a hung rank fails the run); the default group
        # keeps the long start-up one
        dist.barrier()  # on the default group (start-up timeout): everyone is here before the short clock starts
        timeout = job.config.dist.timeout_s
        self.pg = dist.new_group(list(range(k)), timeout=timedelta(seconds=timeout))
        self.clock = VirtualClock(rank, job.config.timeline_spans_per_worker)
        # NCCL carries only CUDA tensors: model, control tensors and buffers go to this rank's GPU. Under gloo
        # the rank trains on the CPU: its reduce and gather carry CPU tensors only, so ``device: cuda`` needs NCCL
        nccl = dist.get_backend() == "nccl"
        if job.config.device == "cuda" and not nccl:
            raise ConfigError(
                job.source,
                "device",
                "device: cuda on the dist engine needs the NCCL backend (dist.backend: nccl, or auto with a GPU "
                "device for every rank in the profile); this run's backend is gloo",
            )
        self.device = torch.device("cuda", torch.cuda.current_device()) if nccl else torch.device("cpu")
        self.pacer: Pacer | None = None
        self.calibration: dict[str, Any] = {}
        self.pacing: list[dict[str, float]] | None = None  # every rank's Pacer.summary(), gathered at the end
        self.pairing: PairingClient | None = None
        self.coordinator: PairingCoordinator | None = None
        self.async_evals: AsyncEvals | None = None
        gossip_pg = None
        self.model = job.make_model().to(self.device)
        self.eval_model = job.make_model()  # rank 0 evaluates on the CPU
        if not job.method.cls.synchronous:
            self.pairing = PairingClient(store, rank, timeout)
            if rank == 0:
                self.coordinator = PairingCoordinator(store, k, timeout)
            eval_pg = dist.new_group(list(range(k)), timeout=timedelta(seconds=timeout))
            gossip_pg = dist.new_group(list(range(k)), timeout=timedelta(seconds=timeout))  # a gossip agent's
            average = job.method.cls.evaluated_on(job.params) == "average"
            like, mask = flat_state(self.model), param_mask(self.model)
            self.async_evals = AsyncEvals(
                store, rank, k, eval_pg, self.pg, average, like, mask, timeout, self._async_complete
            )
        self.comm = DistComm(
            rank,
            k,
            self.clock,
            job.cost,
            job.bytes_scale,
            pairing=self.pairing,
            pace=self._pace,
            group=self.pg,
            timeout=timedelta(seconds=timeout),
            gossip_group=gossip_pg,
            device=self.device,
        )
        self.needs_clock_sync = (
            job.config.budget.unit == "emulated_seconds" or job.config.eval.every_emulated_seconds is not None
        )
        self.wall_start = time.perf_counter()
        self._iteration_of: tuple[Allocation | None, int] = (None, 0)

    def bind(self, harness: HarnessView) -> None:
        self.harness = harness
        self.slot = harness.slots[0]

    def endpoint(self, rank: int) -> tuple[torch.nn.Module, Comm, VirtualClock]:
        return self.model, self.comm, self.clock

    @contextmanager
    def running(self) -> Iterator[None]:
        with seeded_global_rng(self.device, *self.job.seed_parts, "rank", self.rank):  # each rank its own stream
            yield

    # ------------------------------------------------------------------ time
    def _pace(self, virtual_t: float) -> None:
        if self.pacer is not None:
            self.pacer(virtual_t)

    def prepare(self, first_allocation: Callable[[], Allocation]) -> None:
        if self.job.config.throttle.enabled:
            self.pacer = Pacer(self._calibrate(first_allocation()))
            self.slot.worker.pacer = self.pacer

    def _calibrate(self, alloc: Allocation) -> float:
        """Real/virtual ratio of this rank's compute and of a gradient all-reduce; agreed max × margin."""
        cfg = self.job.config.throttle
        if cfg.dilation is not None:
            return cfg.dilation
        # a fresh stream: calibrating must not consume the training data order
        batch = make_stream(self.job, alloc, 0, self.rank).next_batch()
        probe = self.job.make_model().to(self.device)
        inputs, targets = batch.inputs.to(self.device), batch.targets.to(self.device)
        ratios = [0.0]
        if len(batch):
            real = []
            for _ in range(cfg.calibration_steps + 1):
                t = time.perf_counter()
                probe.zero_grad()
                torch.nn.functional.cross_entropy(probe(inputs), targets).backward()
                if self.device.type == "cuda":  # the kernels' time, not their launch
                    torch.cuda.synchronize(self.device)
                real.append(time.perf_counter() - t)
            virtual = self.job.compute.nominal_step_seconds(self.rank, len(batch))
            ratios.append(sorted(real[1:])[len(real[1:]) // 2] / virtual)
        grads = torch.cat([p.detach().reshape(-1) for p in probe.parameters()])
        dist.barrier(group=self.pg)  # time the collective itself, not the wait for ranks still starting up
        real_comm = []
        for _ in range(cfg.calibration_steps + 1):
            t = time.perf_counter()
            dist.all_reduce(grads, group=self.pg)
            real_comm.append(time.perf_counter() - t)
        real_comm_s = sorted(real_comm[1:])[len(real_comm[1:]) // 2]
        virtual_comm = self.job.cost.noise_free().all_reduce(  # no draw: the run's link noise stays aligned
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

    def profile(self, steps: int) -> tuple[float, ...]:
        """Warm-up speeds of every rank: timed real passes when wall time follows the emulated
        devices (throttled), gathered; else the virtual clock's, which every rank computes alike."""
        if self.pacer is None:
            return emulated_profile(self.job, steps)
        return tuple(self.gather([timed_speed(self.job, self.rank, steps, self.device, self.pacer.dilation)]))

    def wall_s(self) -> float:
        return time.perf_counter() - self.wall_start

    def throttled_s(self) -> float | None:
        return self.pacer.throttled_s() if self.pacer else None

    # ------------------------------------------------------------------ process management
    def run_workers(self, body: Callable[[Slot], None]) -> None:
        if self.coordinator is not None:
            self.coordinator.start()
        body(self.slot)

    def started(self, slot: Slot) -> None:
        dist.barrier(group=self.pg)
        self.wall_start = time.perf_counter()
        if self.pacer is not None:
            self.pacer.start()
            self.pacer.t0 -= self.pacer.dilation * self.clock.t  # type: ignore[operator]  # a resumed run continues its timeline

    def finished(self, slot: Slot) -> None:
        if self.pairing is not None:
            self.pairing.done()
        if self.coordinator is not None:
            self.coordinator.join(self.job.config.dist.timeout_s)
        dist.barrier(group=self.pg)
        if self.pacer is not None:  # read at the barrier: evaluation after it is left out of the schedule
            self.pacing = self.gather([self.pacer.summary()])
        if self.async_evals is not None:
            self.async_evals.drain(self._final_contribution)

    # ------------------------------------------------------------------ bookkeeping
    def rendezvous(self, slot: Slot, samples: int, then: Callable[[int, float], bool]) -> bool:
        """Every rank runs ``then`` itself: the iteration's samples follow from the shared allocation."""
        emulated = self.clock.t
        if self.needs_clock_sync:
            t = torch.tensor([self.clock.t], dtype=torch.float64, device=self.device)
            dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.pg)
            emulated = float(t)
        return then(self._samples_per_iteration(), emulated)

    def _samples_per_iteration(self) -> int:
        alloc = self.harness.alloc
        if self._iteration_of[0] is not alloc:
            assert alloc is not None
            n = len(self.job.bundle.train)
            sizes = shard_sizes(n, alloc.shares) if alloc.partition == "iid_shards" else None
            total = sum(b for r, b in enumerate(alloc.batch_sizes) if b > 0 and (sizes is None or sizes[r] > 0))
            self._iteration_of = (alloc, total)
        return self._iteration_of[1]

    def in_order(self, slot: Slot, then: Callable[[], bool]) -> bool:
        stop = then()
        if self.async_evals is not None:
            self.async_evals.poll()
        return stop

    def count_gradient(self, schedule: TrainingSchedule, samples: int, clock_s: float) -> None:
        """Global counts from the store; this rank's own clock is all it knows of emulated time."""
        schedule.gradients = int(self.store.add("progress/gradients", 1))
        schedule.samples = int(self.store.add("progress/samples", samples))
        schedule.steps = schedule.gradients / self.job.world_size
        schedule.emulated_s = max(schedule.emulated_s, clock_s)

    # ------------------------------------------------------------------ meeting
    def gather(self, values: list[Any]) -> list[Any]:
        out: list[Any] = [None] * self.job.world_size
        dist.all_gather_object(out, values[0], group=self.pg)
        return out

    def barrier(self) -> None:
        dist.barrier(group=self.pg)

    def timeline(self, local: list[Span]) -> list[Span]:
        spans: list[Any] = [None] * self.job.world_size
        dist.all_gather_object(spans, local, group=self.pg)
        return [s for per in spans for s in per]

    def evaluate(
        self,
        models: list[torch.nn.Module],
        reports: list[RankReport],
        eval_on: Literal["average", "rank0"],
        final: bool,
        blocking: bool,
        members: tuple[int, ...] | None = None,
    ) -> None:
        """Blocking: average (uncharged) onto rank 0 and gather the reports there. Otherwise this rank
        contributes without waiting (:mod:`distrepro.engine.multiprocess.evals`)."""
        average = eval_on == "average"
        if not blocking:
            if members is not None:  # the non-blocking reduce sums every rank's distance
                raise NotImplementedError("dist engine: consensus over a subset of ranks needs a lockstep method")
            assert self.async_evals is not None
            self.async_evals.contribute(self.harness.schedule.eval_points_passed, flat_state(self.model), reports[0])
            return
        flat = flat_state(self.model) if average or self.rank == 0 else None
        started = time.perf_counter()
        try:
            consensus = self._consensus(members)
            if average:
                assert flat is not None
                dist.reduce(flat, dst=0, group=self.pg)
            everyone: list[Any] | None = [None] * self.job.world_size if self.rank == 0 else None
            dist.gather_object(reports[0], everyone, dst=0, group=self.pg)
            if self.rank == 0:
                assert flat is not None and everyone is not None
                mean = flat / self.job.world_size if average else flat
                self._evaluate_on_rank0(mean, everyone, final, consensus)
        finally:
            dist.barrier(group=self.pg)  # everyone resumes together, after rank 0's evaluation
            if self.pacer is not None:
                self.pacer.shift(time.perf_counter() - started)

    def _consensus(self, members: tuple[int, ...] | None) -> float:
        """(1/n)·Σ‖x_i − x̄‖² over the ``members``' replicas (None: every rank) on rank 0 (0.0 elsewhere):
        an all-reduce of the parameters for x̄, then each rank's ‖x_i − x̄‖² reduced; a rank outside
        contributes zeros. Raw collectives on the run's group, not ``Comm``: observing costs no virtual
        time and no bytes."""
        own = param_vector(self.model)
        inside = members is None or self.rank in members
        n = self.job.world_size if members is None else len(members)
        mean = own.clone() if inside else torch.zeros_like(own)
        dist.all_reduce(mean, group=self.pg)
        mean /= n
        square = torch.sum((own - mean) ** 2).reshape(1) if inside else own.new_zeros(1)
        dist.reduce(square, dst=0, group=self.pg)
        return float(square) / n

    def _evaluate_on_rank0(self, flat: torch.Tensor, reports: list[RankReport], final: bool, consensus: float) -> None:
        load_flat(self.eval_model, flat)
        self.harness.evaluated(self.eval_model, reports, final, consensus)

    def _async_complete(self, flat: torch.Tensor, reports: list[RankReport], consensus: float) -> None:
        """Rank 0, an asynchronous evaluation every rank has contributed to; its wall time is not paced."""
        started = time.perf_counter()
        self._evaluate_on_rank0(flat, reports, final=False, consensus=consensus)
        if self.pacer is not None:
            self.pacer.shift(time.perf_counter() - started)

    def _final_contribution(self) -> tuple[torch.Tensor, RankReport]:
        """For a point this rank never reached: its state and accounting as training ended."""
        return flat_state(self.model), self.slot.report(self.harness.progress())


def store_of_default_group() -> Any:
    """The c10d store of the default process group, under a prefix of our own."""
    from torch.distributed import distributed_c10d as c10d

    return dist.PrefixStore("distrepro/", c10d._get_default_store())
