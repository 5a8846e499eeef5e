"""The communication cost model: how many virtual seconds a communication call takes.

Everything here is a pure function of the hardware profile (and, for noise, of derived seeds),
so two runs of the same config charge exactly the same times on any machine. No global RNG is
touched: a method's own randomness and the clock's noise must never perturb each other. The
compute side (``t_fixed + b / peak`` per step, jitter, stragglers) is :mod:`distrepro.timing.compute`,
re-exported here.

Collectives (all-reduce, reduce-scatter, all-gather, broadcast) run as NCCL runs them: the algorithm
and protocol of each call are chosen by NCCL's rule, ``collective_algorithm`` pins the algorithm
(:mod:`distrepro.timing.collective_algorithms`). Point-to-point messages and the parameter server keep the alpha-beta
(latency-bandwidth, Hockney 1994) model. A path over heterogeneous links is charged at its *worst*
link (largest α, smallest B): the pipeline of a ring or a tree level moves at the pace of its slowest hop.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from distrepro.hardware.profile_parts import ResolvedLink
from distrepro.hardware.profiles import HardwareProfile
from distrepro.seeding import derive_seed
from distrepro.timing import collective_algorithms as coll
from distrepro.timing.collective_algorithms import CollectiveCost, Topology
from distrepro.timing.compute import ComputeModel, lognormal, sigma_of_cv, uniforms

__all__ = ["CommCostModel", "ComputeModel", "sigma_of_cv"]


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
        self._topo_cache: dict[tuple[int, ...], Topology] = {}
        self._cost_cache: dict[tuple[Any, ...], CollectiveCost] = {}
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
        u, _ = uniforms(derive_seed(*self.seed_parts, pattern, *group, k))
        return seconds * lognormal(self._link_sigma, u)

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

    def _topology(self, group: tuple[int, ...]) -> Topology:
        topo = self._topo_cache.get(group)
        if topo is None:
            topo = self._topo_cache[group] = Topology(self.profile, group)
        return topo

    # ------------------------------------------------------------------ collectives
    def collective(
        self, pattern: str, ranks: Sequence[int], nbytes: float, src: int | None = None, algorithm: str | None = None
    ) -> CollectiveCost:
        """How ``pattern`` runs on ``ranks`` for a payload of ``nbytes`` (all-gather: per rank), noise-free:
        algorithm, protocol, seconds, latency part, hops (:mod:`distrepro.timing.collective_algorithms`). ``algorithm``
        overrides the profile's ``collective_algorithm``."""
        group = self._group(ranks)
        if len(group) <= 1:
            return CollectiveCost("none", "none", 0.0, 0.0, ())
        algo = algorithm or self.profile.collective_algorithm
        size = self._size(nbytes)
        key = (pattern, group, size, src, algo)
        cached = self._cost_cache.get(key)
        if cached is not None:
            return cached
        topo = self._topology(group)
        eff = self.profile.efficiency(pattern)
        if pattern == "all_reduce":
            out = coll.all_reduce(topo, size, algo, eff)
        elif pattern == "reduce_scatter":
            out = coll.scatter_or_gather(topo, size, algo, eff, "reduce_scatter")
        elif pattern == "all_gather":
            out = coll.scatter_or_gather(topo, len(group) * size, algo, eff, "all_gather")
        elif pattern == "broadcast":
            if src not in group:
                raise ValueError(f"broadcast source {src} is not in the group {group}")
            out = coll.broadcast(topo, src, size, algo, eff)
        else:
            raise ValueError(f"no collective model for pattern {pattern!r}")
        if len(self._cost_cache) > 4096:
            self._cost_cache.clear()
        self._cost_cache[key] = out
        return out

    def all_reduce(self, ranks: Sequence[int], nbytes: float) -> float:
        """All-reduce of ``nbytes`` as the profile's ``collective_algorithm`` runs it (``auto``: NCCL's choice of
        ring or tree and of protocol; see :mod:`distrepro.timing.collective_algorithms`)."""
        group = self._group(ranks)
        return self._noisy("all_reduce", group, self.collective("all_reduce", group, nbytes).seconds, nbytes)

    def ring_all_reduce(self, ranks: Sequence[int], nbytes: float) -> float:
        """All-reduce pinned to the ring: ``2(p−1)/p · S/B`` plus NCCL's step latencies (gloo for CPU groups:
        ``2(p−1)·α + 2(p−1)/p · S/B``, Thakur, Rabenseifner & Gropp 2005 §4; Patarasuk & Yuan 2009)."""
        group = self._group(ranks)
        seconds = self.collective("all_reduce", group, nbytes, algorithm="ring").seconds
        return self._noisy("all_reduce", group, seconds, nbytes)

    def all_gather(self, ranks: Sequence[int], nbytes_per_rank: float) -> float:
        """All-gather of ``nbytes_per_rank`` from each: NCCL's ring, ``(p−1)/p · S_total/B`` + step latencies."""
        group = self._group(ranks)
        seconds = self.collective("all_gather", group, nbytes_per_rank).seconds
        return self._noisy("all_gather", group, seconds, nbytes_per_rank)

    def reduce_scatter(self, ranks: Sequence[int], nbytes_total: float) -> float:
        """Reduce-scatter of an ``nbytes_total`` vector: NCCL's ring, ``(p−1)/p · S_total/B`` + step latencies."""
        group = self._group(ranks)
        seconds = self.collective("reduce_scatter", group, nbytes_total).seconds
        return self._noisy("reduce_scatter", group, seconds, nbytes_total)

    def broadcast(self, ranks: Sequence[int], src: int, nbytes: float) -> float:
        """Broadcast from ``src``: NCCL's pipelined ring for GPU groups, the binomial tree (MPICH) for gloo."""
        group = self._group(ranks)
        if src not in group:
            raise ValueError(f"broadcast source {src} is not in the group {group}")
        seconds = self.collective("broadcast", group, nbytes, src=src).seconds
        return self._noisy("broadcast", group, seconds, nbytes)

    # ------------------------------------------------------------------ point to point
    def p2p(self, a: int, b: int, nbytes: float) -> float:
        """One message from ``a`` to ``b``: ``α + S/B`` on link(a, b) (Hockney's model).

        Both ends of a message draw the same noise: the pair is keyed in rank order."""
        pair = (a, b) if a < b else (b, a)
        return self._noisy("p2p", pair, self.profile.link(a, b).transfer_s(self._size(nbytes)), nbytes)

    def exchange(self, a: int, b: int, nbytes: float) -> float:
        """A swap of ``nbytes`` each way (``batch_isend_irecv``): both directions at once over full-duplex links, one
        p2p, at the exchange efficiency. NCCL coalesces the two; gloo runs them at once because the engines post the
        receive first (:mod:`distrepro.engine.multiprocess.peer`, *receive_first_swap*; measured through shaped
        links, BENCHMARKS.md "Shaped links")."""
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
