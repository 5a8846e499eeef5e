"""The cost model: how many virtual seconds a step of compute or a communication call takes.

Everything here is a pure function of the hardware profile (and, for noise, of derived seeds),
so two runs of the same config charge exactly the same times on any machine. No global RNG is
touched: a method's own randomness and the clock's noise must never perturb each other.

Compute: the declared speed of a rank for the charged workload (its measured throughput, else
``effective_flops_per_s / flops_per_sample``), slowed by the speed change in force, a mean-1
lognormal jitter and an occasional straggler slowdown.

Communication: the alpha-beta (latency-bandwidth, Hockney 1994) model with the standard
algorithm costs of Thakur, Rabenseifner & Gropp, "Optimization of Collective Communication
Operations in MPICH" (IJHPCA 19(1), 2005), and Patarasuk & Yuan (JPDC 69(2), 2009). A
collective over heterogeneous links is charged at its *worst* link (largest α, smallest B): the
pipeline of a ring or a tree level moves at the pace of its slowest hop.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

from distrepro.errors import ConfigError
from distrepro.hardware.profile_parts import ResolvedLink
from distrepro.hardware.profiles import HardwareProfile
from distrepro.seeding import derive_seed

_STD_NORMAL = NormalDist()


def _uniforms(seed: int) -> tuple[float, float]:
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


def _lognormal(sigma: float, u: float) -> float:
    """``exp(σZ − σ²/2)`` with Z = Φ⁻¹(u): mean exactly 1, so noise adds spread without moving the mean."""
    return math.exp(sigma * _STD_NORMAL.inv_cdf(u) - 0.5 * sigma * sigma)


def _ranks(ranks: Sequence[int]) -> str:
    """``[0, 1, 2, 5]`` → ``"0-2, 5"``."""
    runs: list[list[int]] = []
    for r in sorted(ranks):
        if runs and r == runs[-1][-1] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    return ", ".join(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]) for run in runs)


class ComputeModel:
    """Compute time of one rank's step, for one charged workload.

    ``workload_name`` selects the ``throughput_samples_per_s`` entry; ``flops_per_sample`` is the
    workload's training FLOPs per sample, used where a device has no entry for it. That fallback
    changes a named workload's times (the FLOP/s figure and the measured throughput rarely agree), so
    the ranks it applies to are kept in :attr:`fallback_ranks` and :meth:`fallback_note` says it.
    ``seed_parts`` identify the run (paper, method, profile, seed index, ...); rank and step index
    are appended for each draw.
    """

    def __init__(
        self,
        profile: HardwareProfile,
        workload_name: str | None,
        flops_per_sample: float,
        seed_parts: tuple[object, ...] = (),
    ) -> None:
        if not (math.isfinite(flops_per_sample) and flops_per_sample > 0):
            raise ValueError(f"flops_per_sample must be a positive number, got {flops_per_sample}")
        self.profile = profile
        self.workload_name = workload_name
        self.flops_per_sample = float(flops_per_sample)
        self.seed_parts = tuple(seed_parts)
        #: ranks charged effective_flops_per_s / flops_per_sample although a workload was named
        self.fallback_ranks: tuple[int, ...] = ()
        # resolved for every rank now, so a profile that cannot charge this workload fails at
        # start-up rather than when the slow rank first steps
        self._declared = [self._declare(rank) for rank in range(profile.world_size)]
        # looked up once: device() is on the per-step path of every worker
        self._devices = [profile.device(rank) for rank in range(profile.world_size)]
        # a device's own jitter wins; the others get the profile's compute_cv (if any)
        default = sigma_of_cv(profile.noise.compute_cv) if profile.noise is not None else 0.0
        self._sigma = [d.jitter.sigma if d.jitter.kind == "lognormal" else default for d in self._devices]

    def _declare(self, rank: int) -> float:
        device = self.profile.device(rank)
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
        devices = ", ".join(f"{name} (rank{'s' if len(r) > 1 else ''} {_ranks(r)})" for name, r in by_device.items())
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
        ``noise.compute_cv`` (as σ). A straggler step takes ``slowdown`` times as long.
        """
        device = self._device(rank)
        sigma = self._sigma[rank] if 0 <= rank < len(self._sigma) else 0.0
        if sigma == 0 and device.straggler.probability == 0:
            return 1.0  # no noise declared: skip deriving a seed every step
        u_jitter, u_straggler = _uniforms(derive_seed(*self.seed_parts, rank, step_index))
        factor = _lognormal(sigma, u_jitter) if sigma > 0 else 1.0
        if u_straggler < device.straggler.probability:
            factor *= device.straggler.slowdown
        return factor

    def step_seconds(self, rank: int, n_samples: int, step_index: int, at_s: float) -> float:
        """Virtual seconds for ``n_samples`` samples on ``rank`` in step ``step_index``.

        The speed factor is the one in force when the step starts (``at_s``); a step that crosses
        a change is charged at the old speed. Factor 0.5 makes the step twice as long.
        """
        if n_samples < 0:
            raise ValueError(f"n_samples must be >= 0, got {n_samples}")
        if n_samples == 0:
            return 0.0
        return n_samples / self.samples_per_s(rank, at_s) * self.noise_factor(rank, step_index)


class CommCostModel:
    """Seconds for each communication pattern on a profile.

    ``bytes_scale`` multiplies every payload: the harness sends the proxy model's tensors but
    charges the emulated workload's, so it passes ``workload.param_bytes / proxy_param_bytes``.

    Link noise (``profile.noise.link_cv``): every collective or message is multiplied by a mean-1
    lognormal factor drawn from ``seed_parts`` + (pattern, group, k), k counting the calls of that
    pattern on that group. Members of a group call its collectives in the same order on every
    engine, so the in-process engine (one charge per collective) and each rank of the distributed
    engine (one charge per member) draw the same factors. The counts live in this object and go into a
    checkpoint through :meth:`state_dict` (:mod:`distrepro.engine.checkpoint`), so a resumed run draws the
    factors the uninterrupted run draws next. Control traffic (a few bytes) and calls without payload stay
    noise-free and draw nothing.
    """

    def __init__(self, profile: HardwareProfile, bytes_scale: float = 1.0, seed_parts: tuple[object, ...] = ()) -> None:
        if not (math.isfinite(bytes_scale) and bytes_scale > 0):
            raise ValueError(f"bytes_scale must be a positive number, got {bytes_scale}")
        self.profile = profile
        self.bytes_scale = float(bytes_scale)
        self.seed_parts = tuple(seed_parts)
        self._link_sigma = sigma_of_cv(profile.noise.link_cv) if profile.noise is not None else 0.0
        self._draws: dict[tuple[str, tuple[int, ...]], int] = {}
        self._ring_cache: dict[tuple[int, ...], tuple[float, float]] = {}
        self._latency_cache: dict[tuple[int, ...], float] = {}

    @property
    def noisy(self) -> bool:
        """Whether calls draw link noise: then two calls of the same pattern, group and size cost
        different seconds, and a replay must ask this model for every call, never reuse a charge."""
        return self._link_sigma > 0

    def _noisy(self, pattern: str, group: tuple[int, ...], seconds: float, nbytes: float) -> float:
        """``seconds`` times this call's link-noise factor (1 without link noise).

        A call without payload (``nbytes == 0``) moves no data: it is noise-free and draws nothing, so
        asking a pattern's latency part (the in-process engine's zero-byte charge, which splits a
        collective's cost into latency and bandwidth when operations share links) does not consume the
        draw of the next real call. Otherwise the in-process engine, asking that once per collective,
        would apply every other factor, not the ones the distributed engine and the analytical
        re-timing (:mod:`distrepro.sensitivity.analytic`) draw: k counts the calls that move data."""
        if self._link_sigma == 0 or seconds == 0 or nbytes == 0:
            return seconds
        k = self._draws.get((pattern, group), 0)
        self._draws[(pattern, group)] = k + 1
        u, _ = _uniforms(derive_seed(*self.seed_parts, pattern, *group, k))
        return seconds * _lognormal(self._link_sigma, u)

    def noise_free(self) -> CommCostModel:
        """The same model without link noise, for charges that are not part of a run (throttle calibration,
        plans): asking the noisy model would consume a draw and shift every later factor of that group."""
        return CommCostModel(self.profile.model_copy(update={"noise": None}), self.bytes_scale)

    def state_dict(self) -> dict[str, Any]:
        """Where the link-noise stream stands: the calls counted so far per (pattern, group). Without it a
        resumed run would count from 0 again and redraw the factors of calls made before the checkpoint."""
        return {"draws": [[pattern, list(group), k] for (pattern, group), k in sorted(self._draws.items())]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._draws = {(str(pattern), tuple(int(r) for r in group)): int(k) for pattern, group, k in state["draws"]}

    # ------------------------------------------------------------------ helpers
    def _size(self, nbytes: float) -> float:
        if nbytes < 0:
            raise ValueError(f"message size must be >= 0 bytes, got {nbytes}")
        return float(nbytes) * self.bytes_scale

    @staticmethod
    def _group(ranks: Sequence[int]) -> tuple[int, ...]:
        group = tuple(int(r) for r in ranks)
        if len(set(group)) != len(group):
            raise ValueError(f"a group lists a rank twice: {group}")
        return group

    def _worst(self, pairs: Sequence[tuple[int, int]]) -> tuple[float, float]:
        """(largest latency, smallest bandwidth) over the links of ``pairs``."""
        links: list[ResolvedLink] = [self.profile.link(a, b) for a, b in pairs]
        return max(x.latency_s for x in links), min(x.bandwidth_bytes_per_s for x in links)

    def _ring(self, group: tuple[int, ...]) -> tuple[float, float]:
        """Worst (α, B) over the ring's consecutive pairs, in the given order, wrapping."""
        if group not in self._ring_cache:
            p = len(group)
            self._ring_cache[group] = self._worst([(group[i], group[(i + 1) % p]) for i in range(p)])
        return self._ring_cache[group]

    # ------------------------------------------------------------------ collectives
    def ring_all_reduce(self, ranks: Sequence[int], nbytes: float) -> float:
        """Ring all-reduce (reduce-scatter then all-gather): ``2(p−1)·α + 2(p−1)/p · S/B``.

        Thakur, Rabenseifner & Gropp 2005 §4 (Rabenseifner's algorithm, ring form); Patarasuk &
        Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations", JPDC 69(2),
        2009. The reduction term (p−1)/p·S·γ is left out: negligible next to the network.
        """
        group = self._group(ranks)
        p = len(group)
        if p <= 1:
            return 0.0
        alpha, bandwidth = self._ring(group)
        bandwidth *= self.profile.efficiency("all_reduce")
        return self._noisy(
            "all_reduce", group, 2 * (p - 1) * alpha + 2 * (p - 1) / p * self._size(nbytes) / bandwidth, nbytes
        )

    def all_gather(self, ranks: Sequence[int], nbytes_per_rank: float) -> float:
        """Ring all-gather of ``nbytes_per_rank`` from each: ``(p−1)·α + (p−1)/p · S_total/B``.

        Thakur, Rabenseifner & Gropp 2005 §3 (ring algorithm), with S_total = p · nbytes_per_rank.
        """
        group = self._group(ranks)
        p = len(group)
        if p <= 1:
            return 0.0
        alpha, bandwidth = self._ring(group)
        bandwidth *= self.profile.efficiency("all_gather")
        return self._noisy(
            "all_gather",
            group,
            (p - 1) * alpha + (p - 1) / p * (p * self._size(nbytes_per_rank)) / bandwidth,
            nbytes_per_rank,
        )

    def reduce_scatter(self, ranks: Sequence[int], nbytes_total: float) -> float:
        """Ring reduce-scatter of an ``nbytes_total`` vector: ``(p−1)·α + (p−1)/p · S_total/B``.

        Thakur, Rabenseifner & Gropp 2005 §4 (pairwise-exchange / ring reduce-scatter), γ dropped.
        """
        group = self._group(ranks)
        p = len(group)
        if p <= 1:
            return 0.0
        alpha, bandwidth = self._ring(group)
        bandwidth *= self.profile.efficiency("reduce_scatter")
        return self._noisy(
            "reduce_scatter",
            group,
            (p - 1) * alpha + (p - 1) / p * self._size(nbytes_total) / bandwidth,
            nbytes_total,
        )

    def broadcast(self, ranks: Sequence[int], src: int, nbytes: float) -> float:
        """Binomial-tree broadcast: ``⌈log2 p⌉ · (α + S/B)`` at the tree's worst link.

        Thakur, Rabenseifner & Gropp 2005 §3 (MPICH short-message broadcast). The tree is built on
        the group order rotated to start at ``src``: in round k member i < 2^k sends to i + 2^k.
        """
        group = self._group(ranks)
        if src not in group:
            raise ValueError(f"broadcast source {src} is not in the group {group}")
        p = len(group)
        if p <= 1:
            return 0.0
        start = group.index(src)
        order = group[start:] + group[:start]
        levels = math.ceil(math.log2(p))
        edges = [(order[i], order[i + (1 << k)]) for k in range(levels) for i in range(1 << k) if i + (1 << k) < p]
        alpha, bandwidth = self._worst(edges)
        bandwidth *= self.profile.efficiency("broadcast")
        return self._noisy("broadcast", group, levels * (alpha + self._size(nbytes) / bandwidth), nbytes)

    # ------------------------------------------------------------------ point to point
    def p2p(self, a: int, b: int, nbytes: float) -> float:
        """One message from ``a`` to ``b``: ``α + S/B`` on link(a, b) (Hockney's model).

        Both ends of a message draw the same noise: the pair is keyed in rank order."""
        pair = (a, b) if a < b else (b, a)
        return self._noisy("p2p", pair, self.profile.link(a, b).transfer_s(self._size(nbytes)), nbytes)

    def exchange(self, a: int, b: int, nbytes: float) -> float:
        """A swap of ``nbytes`` each way; links are full duplex, so it costs one p2p (at the exchange efficiency)."""
        eff = self.profile.efficiency("exchange")
        if eff == 1.0:
            return self.p2p(a, b, nbytes)
        link = self.profile.link(a, b)
        return link.latency_s + self._size(nbytes) / (link.bandwidth_bytes_per_s * eff)

    # ------------------------------------------------------------------ parameter server
    def parameter_server(self, ranks: Sequence[int], nbytes: float) -> float:
        """Every worker pushes ``nbytes`` and pulls ``nbytes`` back through one server.

        ``max( max_w 2(α_w + S/B_w), 2·α_s + 2·W·S/B_s )``: a worker needs its own push + pull
        (Li et al., "Scaling Distributed Machine Learning with the Parameter Server", OSDI 2014,
        pattern), and the server's own link carries all W pushes and W pulls one after another, so
        with many workers it is the bottleneck.
        """
        group = self._group(ranks)
        if not group:
            return 0.0
        size = self._size(nbytes)
        worker = max(2 * self.profile.server_link(r).transfer_s(size) for r in group)
        uplink = self.profile.server_uplink()
        server = 2 * uplink.latency_s + 2 * len(group) * size / uplink.bandwidth_bytes_per_s
        return self._noisy("parameter_server", group, max(worker, server), nbytes)

    def parameter_server_async(self, ranks: Sequence[int], nbytes: float, arrivals: Sequence[float]) -> float:
        """Seconds from the last worker's arrival until every worker holds the average, when the server
        receives each push as it comes (C-ADP's asynchronous receive) instead of starting when all are in.

        Worker j (arrived at ``arrivals[j]``) pushes over its own server link (α_j + S/B_j); the server's
        link takes the pushes one after another in order of arrival (α_s, then S/B_s each); the server
        averages once the last push is in, then every worker pulls (the pull half of
        :meth:`parameter_server`: max(max_w α_w + S/B_w, α_s + W·S/B_s)). With equal arrivals this is
        at least the collective charge's half-sums; a device whose round ends early hides its push.
        """
        group = self._group(ranks)
        if not group:
            return 0.0
        size = self._size(nbytes)
        up = self.profile.server_uplink()
        per = size / up.bandwidth_bytes_per_s
        server = ready = -math.inf
        for a, r in sorted(zip(arrivals, group, strict=True)):
            server = max(server, a + up.latency_s) + per
            ready = max(ready, a + self.profile.server_link(r).transfer_s(size), server)
        pull = max(max(self.profile.server_link(r).transfer_s(size) for r in group), up.latency_s + len(group) * per)
        return self._noisy("parameter_server", group, ready + pull - max(arrivals), nbytes)

    # ------------------------------------------------------------------ control traffic
    def control(self, ranks: Sequence[int]) -> float:
        """A round of tiny messages (all_gather_object, barrier): the largest latency in the group.

        Payload and log-p rounds are ignored: control traffic is a few bytes, and charging only
        the slowest latency keeps it from dominating a step while never making it free.
        """
        group = self._group(ranks)
        if len(group) <= 1:
            return 0.0
        key = tuple(sorted(group))
        if key not in self._latency_cache:
            pairs = [(a, b) for i, a in enumerate(key) for b in key[i + 1 :]]
            self._latency_cache[key] = self._worst(pairs)[0]
        return self._latency_cache[key]
