"""The parts of a hardware profile: device groups, nodes, links, noise, efficiencies, backward timing.

Each is a strict pydantic model whose errors name the field; :class:`distrepro.hardware.profiles.HardwareProfile`
assembles them into a cluster and :func:`distrepro.hardware.profiles.load_profile` reads one from YAML. Every
figure carries a ``source`` with a provenance tag (``[M]``, ``[D]``, ``[E]``, ``[S]``, ``[L]``;
``hardware_profiles/README.md``), which :data:`Source` enforces.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from distrepro.hardware.profile_ranges import FigureRange, check_device_ranges, check_link_ranges

_TAG = re.compile(r"\[[MDESL](?:/[MDESL])*\]")

Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]


def _check_source(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty: say where the figures come from")
    if not _TAG.search(value):
        raise ValueError("must carry a provenance tag [M], [D], [E], [S] or [L] (see hardware_profiles/README.md)")
    return value


Source = Annotated[str, AfterValidator(_check_source)]


#: most ranks a profile may declare: each rank is a worker that trains a real model replica in this process (or
#: a process of its own), so a profile of a billion devices would only exhaust the memory while it is planned
MAX_RANKS = 16_384


class Strict(BaseModel):
    """Unknown keys are errors: a typo (``bandwith``) must not silently fall back to a default; no number may
    be ``.inf`` or ``.nan`` (a figure that is not finite has no place in a time model)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Link(Strict):
    """A link class: per-message latency and effective bandwidth (GB/s = 1e9 bytes/s)."""

    latency_us: NonNegative
    bandwidth_gbytes_per_s: Positive
    source: Source
    #: plausible ranges of estimated figures (``latency_us``, ``bandwidth_gbytes_per_s``), see profile_ranges
    ranges: dict[str, FigureRange] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _ranges_contain_values(self) -> Link:
        check_link_ranges(
            {"latency_us": self.latency_us, "bandwidth_gbytes_per_s": self.bandwidth_gbytes_per_s}, self.ranges
        )
        return self


class Jitter(Strict):
    """Per-step multiplicative noise on compute time; ``lognormal`` has mean 1 (see timemodel)."""

    kind: Literal["none", "lognormal"] = "none"
    sigma: NonNegative = 0.0


class Straggler(Strict):
    """With ``probability`` per step, the step takes ``slowdown`` times as long."""

    probability: Annotated[float, Field(ge=0, le=1)] = 0.0
    slowdown: Annotated[float, Field(ge=1, allow_inf_nan=False)] = 1.0


class Noise(Strict):
    """Clock noise of the whole cluster, as coefficients of variation of mean-1 lognormal factors.

    ``compute_cv``: per step and rank, on every device whose own ``jitter`` is ``none``;
    ``link_cv``: per collective or message, on its whole cost; ``gpu_cv``: each GPU's own sustained speed, drawn
    once per GPU rank and seed (the seed's arms share the draw: one cluster) and kept at every step (GPUs of one
    SKU settle at their own clocks under the power cap:
    :data:`distrepro.timing.framework.GPU_CV` is the published figure), on the GPU part of a step only, not its
    host floor or syncs. Without noise every seed charges identical times and a timing CI has zero width, which
    says nothing about a real cluster.
    """

    compute_cv: NonNegative = 0.0
    link_cv: NonNegative = 0.0
    gpu_cv: NonNegative = 0.0
    source: Source


class SpeedChange(Strict):
    """From virtual time ``at_s`` on, the device runs at ``factor`` × its declared speed."""

    at_s: NonNegative
    factor: Positive


class DeviceGroup(Strict):
    """``count`` identical devices; each one is a rank."""

    name: str = Field(min_length=1)
    kind: Literal["gpu", "cpu"]
    count: int = Field(ge=1, le=MAX_RANKS)
    memory_gib: Positive
    cores: int | None = Field(default=None, ge=1)
    batch_size: int | None = Field(default=None, ge=1)
    throughput_samples_per_s: dict[str, Positive] = Field(default_factory=dict)
    #: schema 2: fixed cost of one training step per workload, milliseconds: a step of b samples takes
    #: ``step_overhead_ms/1000 + b / throughput_samples_per_s`` (absent: 0, the large-batch throughput alone)
    step_overhead_ms: dict[str, NonNegative] = Field(default_factory=dict)
    #: schema 2: the host's floor per step and workload, milliseconds: the framework issues a step's kernels one by
    #: one from the CPU, so no step takes less, however few its samples: ``max(step_floor_ms/1000, t_fixed + b/peak)``
    #: (absent: no floor). ``ranges.overhead`` scales it with ``step_overhead_ms`` (both are fixed costs)
    step_floor_ms: dict[str, NonNegative] = Field(default_factory=dict)
    #: schema 2: the spread of one workload's steps from its batches (their padded work varies step to step and
    #: rank to rank), as the sigma of a mean-1 lognormal factor on the step; independent of ``jitter``, so the
    #: two combine as ``sqrt(sigma_jitter^2 + sigma_batches^2)`` (absent: 0)
    step_jitter_sigma: dict[str, NonNegative] = Field(default_factory=dict)
    #: schema 2: what one workload's step loses, milliseconds, each time its training loop makes the host wait for the
    #: GPU: the host can no longer issue the next ops ahead of the GPU, so the pipeline drains and refills. Per loop:
    #: ``per_step`` (the loss read back and AMP's overflow check once a step) and ``per_bucket`` (also after each
    #: bucket's optimizer update inside backward); the method names its loop (``Method.host_syncs``). Added to
    #: ``max(t_floor, t_fixed + b/peak)``, which assumes a host free to run ahead (absent: 0)
    host_sync_ms: dict[str, dict[Literal["per_step", "per_bucket"], NonNegative]] = Field(default_factory=dict)
    effective_flops_per_s: Positive | None = None
    source: Source
    jitter: Jitter = Field(default_factory=Jitter)
    straggler: Straggler = Field(default_factory=Straggler)
    speed_changes: list[SpeedChange] = Field(default_factory=list)
    nic: Link | None = None
    #: ``speed``: plausible range of a factor on every declared speed of the group (see profile_ranges)
    ranges: dict[str, FigureRange] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _speed_range(self) -> DeviceGroup:
        check_device_ranges(self.ranges)
        if "overhead" in self.ranges and not (self.step_overhead_ms or self.step_floor_ms):
            raise ValueError("ranges.overhead: the group declares no step_overhead_ms or step_floor_ms to range")
        return self

    @field_validator("host_sync_ms")
    @classmethod
    def _both_loops(
        cls, host_sync_ms: dict[str, dict[Literal["per_step", "per_bucket"], float]]
    ) -> dict[str, dict[Literal["per_step", "per_bucket"], float]]:
        """A method runs one loop or the other: a workload declaring only one would charge the other nothing."""
        for workload, loops in host_sync_ms.items():
            if set(loops) != {"per_step", "per_bucket"}:
                raise ValueError(f"host_sync_ms.{workload}: give both loops, per_step and per_bucket")
        return host_sync_ms

    @field_validator("speed_changes")
    @classmethod
    def _sorted(cls, changes: list[SpeedChange]) -> list[SpeedChange]:
        times = [c.at_s for c in changes]
        if any(b <= a for a, b in itertools.pairwise(times)):
            raise ValueError(f"at_s must be strictly increasing, got {times}")
        return changes

    def speed_factor(self, at_s: float) -> float:
        """The speed multiplier in force at virtual time ``at_s`` (1.0 before the first change)."""
        factor = 1.0
        for change in self.speed_changes:
            if change.at_s <= at_s:
                factor = change.factor
            else:
                break
        return factor


class Node(Strict):
    """One machine; ranks on the same node talk over ``network.intra_node``.

    ``nic``: the node's one network interface, shared by all its devices (schema 2). Its bandwidth caps
    every inter-node path of the node *and* is the capacity that concurrent flows through the node share
    (:mod:`distrepro.timing.network`); without it the node's uplink is ``network.inter_node``. Before schema 2 a NIC
    could only be declared per device, which gave each GPU of a node a NIC of its own.
    """

    name: str = Field(min_length=1)
    devices: list[DeviceGroup] = Field(min_length=1)
    nic: Link | None = None


class Efficiency(Strict):
    """Per-pattern bandwidth efficiency (schema 2): achieved bus bandwidth / link bandwidth for that pattern,
    e.g. NCCL all-reduce reaching ~80 % of the link on TCP. Applied to the bandwidth term only."""

    all_reduce: Annotated[float, Field(gt=0, le=1)] = 1.0
    reduce_scatter: Annotated[float, Field(gt=0, le=1)] = 1.0
    all_gather: Annotated[float, Field(gt=0, le=1)] = 1.0
    broadcast: Annotated[float, Field(gt=0, le=1)] = 1.0
    exchange: Annotated[float, Field(gt=0, le=1)] = 1.0
    source: Source


class NetworkBase(Strict):
    """The link classes; ``server`` is the worker↔parameter-server path (default: inter_node).

    Schema 2 adds ``message_overhead_us`` (a software cost per message on top of every link's latency,
    e.g. a framework's launch overhead, with its ``overhead_source``) and ``efficiency`` per pattern.
    """

    intra_node: Link
    inter_node: Link
    server: Link | None = None
    message_overhead_us: NonNegative = 0.0
    overhead_source: Source | None = None
    efficiency: Efficiency | None = None


class Network(NetworkBase):
    """The default network plus named alternatives selected at load time (``variant=``)."""

    variants: dict[str, NetworkBase] | None = None


@dataclass(frozen=True)
class ResolvedLink:
    """A link between two endpoints in SI units, converted once so cost formulas stay unit-free."""

    latency_s: float
    bandwidth_bytes_per_s: float

    def transfer_s(self, nbytes: float) -> float:
        """α + S/B: one message of ``nbytes`` over this link."""
        return self.latency_s + nbytes / self.bandwidth_bytes_per_s


def resolve_link(link: Link, *caps: Link | None, overhead_us: float = 0.0) -> ResolvedLink:
    """``link`` limited by each endpoint's NIC: the slowest bandwidth and the largest latency win, plus
    the per-message software overhead."""
    latency_us = link.latency_us
    bandwidth = link.bandwidth_gbytes_per_s
    for cap in caps:
        if cap is not None:
            latency_us = max(latency_us, cap.latency_us)
            bandwidth = min(bandwidth, cap.bandwidth_gbytes_per_s)
    return ResolvedLink(latency_s=(latency_us + overhead_us) / 1e6, bandwidth_bytes_per_s=bandwidth * 1e9)


#: share of a training step's compute spent in backward when a profile states none: the backward pass costs
#: about twice the forward's FLOPs (the usual 1:2 ratio, Kaplan et al., "Scaling Laws for Neural Language
#: Models", arXiv 2001.08361, §2.1: C ≈ 6N per token of which 2N forward) [D]
DEFAULT_BACKWARD_FRACTION = 2.0 / 3.0


class Backward(Strict):
    """When gradients become ready (schema 2): ``fraction`` of a step's compute is backward, and buckets
    become ready evenly over it, last layer first (what overlap of communication with backward needs)."""

    fraction: Annotated[float, Field(gt=0, lt=1)]
    source: Source


class Framework(Strict):
    """How the emulated cluster's framework runs its communication (optional; each figure left out takes the default
    of :mod:`distrepro.timing.framework`, which says where it comes from).

    ``backend``: ``nccl`` (GPU kernels; links full duplex, collectives contend with backward for SMs and memory
    bandwidth) or ``gloo`` (CPU threads over TCP; collectives do not contend with backward).
    Default: ``nccl`` when every device is a GPU, else ``gloo`` (``torch.distributed`` runs NCCL only on GPUs).
    ``contention``: the fraction by which backward slows while a synchronous collective overlaps it (0 pins it
    off). ``launch_us`` and ``bucket_passes``: DDP's reducer's GPU µs per gradient tensor and the bytes it moves per
    gradient byte (:data:`distrepro.timing.framework.REDUCERS`)."""

    backend: Literal["nccl", "gloo"] | None = None
    contention: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] | None = None
    launch_us: NonNegative | None = None
    bucket_passes: NonNegative | None = None
    source: Source
    #: plausible ranges (``contention``, ``launch_us``, ``bucket_passes``); a figure without one is swept over the
    #: default range of :data:`distrepro.timing.framework.RANGES`, a figure pinned to 0 not at all
    ranges: dict[str, FigureRange] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _ranges_name_figures(self) -> Framework:
        for key, rng in self.ranges.items():
            if key not in FRAMEWORK_FIGURES:
                raise ValueError(f"ranges.{key}: a framework block ranges only {', '.join(FRAMEWORK_FIGURES)}")
            value = getattr(self, key)
            if value is not None and not rng.contains(value):
                raise ValueError(f"ranges.{key}: [{rng.low:g}, {rng.high:g}] does not contain the value {value:g}")
        return self


#: the framework figures a sensitivity sweep moves (:class:`Framework`)
FRAMEWORK_FIGURES = ("contention", "launch_us", "bucket_passes")
