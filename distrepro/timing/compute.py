"""The compute cost model: how many virtual seconds one rank's training step takes.

A step of b samples costs ``max(t_floor, t_fixed + b / peak) + t_sync``: ``peak`` is the
large-batch speed a profile declares (``throughput_samples_per_s``, else ``effective_flops_per_s`` / FLOPs per
sample), ``t_fixed`` its ``step_overhead_ms`` (the GPU's own per-step work: the optimizer's passes over the
parameters, each kernel's launch floor; 0 when absent) and ``t_floor`` its ``step_floor_ms`` (the host's: the
framework issues the step's kernels one by one, and a GPU cannot finish a step before the host has issued it; 0
when absent). Host and GPU run asynchronously, so the longer of the two is the step (strong scaling,
where a shrinking per-GPU batch leaves a fast GPU waiting on its host). ``t_sync`` is what the training loop's host
syncs take back from that overlap (``host_sync_ms`` for the method's loop,
:attr:`distrepro.api.method.Method.host_syncs`; 0 when absent): at each sync the host stops issuing until the GPU
has drained its queue, then the GPU waits for the next ops. A speed change divides the GPU's part, a mean-1
lognormal jitter and an occasional straggler slowdown multiply the step. Everything is a pure function of the
profile and of derived seeds, so two runs of a config charge the same times on any machine; no global RNG is touched.
The noise helpers here are shared with the communication model (:mod:`distrepro.timing.timemodel`).
"""

from __future__ import annotations

import math
import random
from statistics import NormalDist
from typing import Any

from distrepro.config.run_config import index_spans
from distrepro.errors import ConfigError
from distrepro.hardware.profiles import HardwareProfile
from distrepro.seeding import derive_seed

_STD_NORMAL = NormalDist()


def uniforms(seed: int) -> tuple[float, float]:
    """Two uniforms in (0, 1) from ``seed``: the first for jitter, the second for stragglers.

    ``random.Random(int).random()`` is the one part of ``random`` that Python guarantees to
    reproduce across versions; the normal is then taken by inverse CDF rather than
    ``gauss()``, whose algorithm is not guaranteed. Both draws are always taken so that the
    stream does not depend on which noise a profile enables.
    """
    rng = random.Random(seed)
    first, second = rng.random(), rng.random()
    return max(first, 2.0**-60), second


def sigma_of_cv(cv: float) -> float:
    """σ of a mean-1 lognormal whose coefficient of variation is ``cv``: √ln(1 + cv²) (≈ cv when small)."""
    return math.sqrt(math.log1p(cv * cv))


def lognormal(sigma: float, u: float) -> float:
    """``exp(σZ − σ²/2)`` with Z = Φ⁻¹(u): mean exactly 1, so noise adds spread without moving the mean."""
    return math.exp(sigma * _STD_NORMAL.inv_cdf(u) - 0.5 * sigma * sigma)


class ComputeModel:
    """Compute time of one rank's step, for one charged workload: ``t_fixed + b / peak`` for a step of b samples.

    ``peak`` is the large-batch speed (``throughput_samples_per_s``, else FLOP/s / FLOPs per sample) and
    ``t_fixed`` the device's ``step_overhead_ms`` for the workload (0 when absent): the per-step cost that does
    not shrink with the batch (kernel launches, small memory-bound kernels, the optimizer), which makes a step
    on a small per-device batch latency-bound. A speed change divides both; noise multiplies the whole step.

    ``workload_name`` selects the ``throughput_samples_per_s`` entry; ``flops_per_sample`` is the
    workload's training FLOPs per sample, used where a device has no entry for it. That fallback
    changes a named workload's times (the FLOP/s figure and the measured throughput rarely agree), so
    the ranks it applies to are kept in :attr:`fallback_ranks` and :meth:`fallback_note` says it.
    ``seed_parts`` identify the run (paper, method, profile, seed index, ...); rank and step index
    are appended for each draw. ``hardware_seed_parts`` (default ``seed_parts``) identify the cluster the run
    drew: each GPU's own speed (``noise.gpu_cv``) is drawn from them, so arms whose hardware parts are equal (a
    job builds them without the method) run on the same draw of GPUs, as a paper's methods run on one cluster.
    """

    def __init__(
        self,
        profile: HardwareProfile,
        workload_name: str | None,
        flops_per_sample: float,
        seed_parts: tuple[object, ...] = (),
        host_syncs: str = "per_step",
        hardware_seed_parts: tuple[object, ...] | None = None,
    ) -> None:
        if not (math.isfinite(flops_per_sample) and flops_per_sample > 0):
            raise ValueError(f"flops_per_sample must be a positive number, got {flops_per_sample}")
        self.profile = profile
        self.workload_name = workload_name
        self.flops_per_sample = float(flops_per_sample)
        self.seed_parts = tuple(seed_parts)
        self.hardware_seed_parts = self.seed_parts if hardware_seed_parts is None else tuple(hardware_seed_parts)
        #: where the method's training loop makes the host wait for the GPU (``per_step`` or ``per_bucket``)
        self.host_syncs = host_syncs
        #: ranks charged effective_flops_per_s / flops_per_sample although a workload was named
        self.fallback_ranks: tuple[int, ...] = ()
        # looked up once, first: device() is on the per-step path of every worker, and the figures below read it
        self._devices = [profile.device(rank) for rank in range(profile.world_size)]
        # resolved for every rank now, so a profile that cannot charge this workload fails at
        # start-up rather than when the slow rank first steps
        self._declared = [self._declare(rank) for rank in range(profile.world_size)]
        self._overhead = [self._declare_overhead(rank) for rank in range(profile.world_size)]
        self._floor = [self._declare_floor(rank) for rank in range(profile.world_size)]
        self._sync = [self._declare_sync(rank) for rank in range(profile.world_size)]
        # a device's own jitter wins; the others get the profile's compute_cv (if any); the workload's batch spread
        # (``step_jitter_sigma``) is independent of either: the product of the two lognormals, sigmas in quadrature
        default = sigma_of_cv(profile.noise.compute_cv) if profile.noise is not None else 0.0
        self._sigma = [
            math.hypot(
                d.jitter.sigma if d.jitter.kind == "lognormal" else default,
                d.step_jitter_sigma.get(workload_name or "", 0.0),
            )
            for d in self._devices
        ]
        # each GPU's own speed (``noise.gpu_cv``): one draw per rank and cluster, the same at every step
        gpu_sigma = sigma_of_cv(profile.noise.gpu_cv) if profile.noise is not None else 0.0
        self._gpu_speed = [
            lognormal(gpu_sigma, uniforms(derive_seed(*self.hardware_seed_parts, rank, "gpu-speed"))[0])
            if gpu_sigma > 0 and d.kind == "gpu"
            else 1.0
            for rank, d in enumerate(self._devices)
        ]

    def _declare(self, rank: int) -> float:
        device = self._device(rank)
        if self.workload_name is not None and self.workload_name in device.throughput_samples_per_s:
            return device.throughput_samples_per_s[self.workload_name]
        if device.effective_flops_per_s is not None:
            if self.workload_name is not None and rank not in self.fallback_ranks:
                self.fallback_ranks = (*self.fallback_ranks, rank)
            return device.effective_flops_per_s / self.flops_per_sample
        known = ", ".join(sorted(device.throughput_samples_per_s)) or "none"
        raise ConfigError(
            self.profile.origin,
            self.profile.device_path(rank),
            f"device '{device.name}' (rank {rank}) cannot be charged for workload '{self.workload_name}': "
            f"no throughput_samples_per_s entry for it (has: {known}) and no effective_flops_per_s",
        )

    def _declare_overhead(self, rank: int) -> float:
        """The rank's fixed step cost for this workload, seconds (0 without a ``step_overhead_ms`` entry)."""
        ms = self._device(rank).step_overhead_ms.get(self.workload_name or "", 0.0)
        return ms / 1000.0

    def _declare_floor(self, rank: int) -> float:
        """The rank's host floor for one step of this workload, seconds (0 without a ``step_floor_ms`` entry)."""
        ms = self._device(rank).step_floor_ms.get(self.workload_name or "", 0.0)
        return ms / 1000.0

    def _declare_sync(self, rank: int) -> float:
        """What the loop's host syncs add to one step of this workload on ``rank``, seconds (0 when not declared)."""
        return self._device(rank).host_sync_ms.get(self.workload_name or "", {}).get(self.host_syncs, 0.0) / 1000.0

    def sync_s(self, rank: int) -> float:
        """The profile's host-sync cost of one step of this workload on ``rank``, for the method's loop."""
        return self._sync[rank] if 0 <= rank < len(self._sync) else self._declare_sync(rank)

    def floor_s(self, rank: int) -> float:
        """The profile's host floor of one step of this workload on ``rank``: no step is charged less (before noise)."""
        return self._floor[rank] if 0 <= rank < len(self._floor) else self._declare_floor(rank)

    def overhead_s(self, rank: int) -> float:
        """The profile's fixed cost of one step of this workload on ``rank`` (before speed changes and noise)."""
        return self._overhead[rank] if 0 <= rank < len(self._overhead) else self._declare_overhead(rank)

    def nominal_step_seconds(self, rank: int, n_samples: int) -> float:
        """``max(t_floor, t_fixed + n / peak) + t_sync``: a step of ``n_samples`` at the declared figures, no speed
        change, no noise."""
        if n_samples <= 0:
            return 0.0
        gpu = self.overhead_s(rank) + n_samples / self.declared_samples_per_s(rank)
        return max(self.floor_s(rank), gpu) + self.sync_s(rank)

    def fallback_note(self, measured_only: bool = False) -> str | None:
        """One line naming the devices whose speed for the named workload comes from FLOP/s, or None.

        ``measured_only``: only devices that declare measured throughputs for *other* workloads, where
        the fallback silently mixes two bases (the surprise worth a warning). A device without any
        throughput entry declares its speed in FLOP/s alone (the chao profiles are calibrated so), and
        charging it that way is its declaration, not a fallback: the run's tag still records it.
        """
        ranks = [r for r in self.fallback_ranks if not measured_only or self.profile.device(r).throughput_samples_per_s]
        if not ranks:
            return None
        by_device: dict[str, list[int]] = {}
        for rank in ranks:
            by_device.setdefault(self.profile.device(rank).name, []).append(rank)
        devices = ", ".join(
            f"{name} (rank{'s' if len(r) > 1 else ''} {index_spans(r)})" for name, r in by_device.items()
        )
        return (
            f"profile '{self.profile.name}' has no throughput_samples_per_s entry for workload "
            f"'{self.workload_name}' on {devices}: charged effective_flops_per_s / "
            f"{self.flops_per_sample:.4g} FLOPs per sample instead"
        )

    def _device(self, rank: int) -> Any:
        return self._devices[rank] if 0 <= rank < len(self._devices) else self.profile.device(rank)

    def declared_samples_per_s(self, rank: int) -> float:
        """The profile's speed for this workload, before speed changes and noise."""
        return self._declared[rank] if 0 <= rank < len(self._declared) else self._declare(rank)

    def samples_per_s(self, rank: int, at_s: float = 0.0) -> float:
        """Declared speed × the speed-change factor in force at virtual time ``at_s``."""
        return self.declared_samples_per_s(rank) * self._device(rank).speed_factor(at_s)

    def noise_factor(self, rank: int, step_index: int) -> float:
        """Jitter × straggler multiplier of this (rank, step): 1.0 when the profile declares none.

        Jitter is ``exp(σZ − σ²/2)``: lognormal with mean exactly 1, so it adds variance without
        changing the expected speed; σ is the device's own ``jitter.sigma``, else the profile's
        ``noise.compute_cv`` (as σ), combined in quadrature with the workload's ``step_jitter_sigma``
        (its batches' spread). A straggler step takes ``slowdown`` times as long.
        """
        device = self._device(rank)
        sigma = self._sigma[rank] if 0 <= rank < len(self._sigma) else 0.0
        if sigma == 0 and device.straggler.probability == 0:
            return 1.0  # no noise declared: skip deriving a seed every step
        u_jitter, u_straggler = uniforms(derive_seed(*self.seed_parts, rank, step_index))
        factor = lognormal(sigma, u_jitter) if sigma > 0 else 1.0
        if u_straggler < device.straggler.probability:
            factor *= device.straggler.slowdown
        return factor

    def gpu_speed_factor(self, rank: int) -> float:
        """The factor this run's draw of ``rank``'s GPU multiplies the GPU part of every step by (``noise.gpu_cv``;
        1.0 where the profile declares none or the device is not a GPU)."""
        return self._gpu_speed[rank] if 0 <= rank < len(self._gpu_speed) else 1.0

    def step_seconds(self, rank: int, n_samples: int, step_index: int, at_s: float) -> float:
        """Virtual seconds for ``n_samples`` samples on ``rank`` in step ``step_index``.

        The speed factor is the one in force when the step starts (``at_s``); a step that crosses
        a change is charged at the old speed. Factor 0.5 makes the step twice as long.
        """
        if n_samples < 0:
            raise ValueError(f"n_samples must be >= 0, got {n_samples}")
        if n_samples == 0:
            return 0.0
        if 0 <= rank < len(self._declared):  # the tables built at construction, not four method calls a step
            overhead, floor, sync, declared, device, own = (
                self._overhead[rank],
                self._floor[rank],
                self._sync[rank],
                self._declared[rank],
                self._devices[rank],
                self._gpu_speed[rank],
            )
        else:  # a rank the profile does not have: the lookups raise the ConfigError naming it
            overhead, floor, sync = self.overhead_s(rank), self.floor_s(rank), self.sync_s(rank)
            declared, device, own = self.declared_samples_per_s(rank), self._device(rank), 1.0
        if overhead == 0.0 and floor == 0.0 and sync == 0.0:  # the large-batch throughput alone, as before step costs:
            # n / samples_per_s(rank, at_s), with that method's product spelled out
            return n_samples / (declared * device.speed_factor(at_s)) * own * self.noise_factor(rank, step_index)
        base = overhead + n_samples / declared
        gpu = base / device.speed_factor(at_s) * own
        # the host floor and the syncs' drain and refill are the host-GPU pipeline's: a speed change does not scale them
        return ((gpu if floor == 0.0 else max(floor, gpu)) + sync) * self.noise_factor(rank, step_index)
