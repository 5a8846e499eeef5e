"""The costs a framework adds to a data-parallel step, beyond compute and the wire: each from a physical argument.

Why: predictions were fast against every published multi-GPU measurement, even at 2 GPUs and compute-bound,
because the emulator charged a DDP step as compute overlapped with the all-reduce and nothing else. What a real
``DistributedDataParallel`` step adds, term by term (each with a central value and a plausible range, swept by
``distrepro sensitivity`` through the profile's ``overhead`` factor or listed in :data:`RANGES`):

* **per-step framework cost** (charged by both engines on a bucketed forward/backward): DDP's reducer runs an
  autograd hook per parameter tensor and launches one copy kernel per tensor into its bucket (PyTorch
  ``torch/csrc/distributed/c10d/reducer.cpp``, ``mark_variable_ready`` / ``copy_grad_to_bucket``; Li et al.,
  "PyTorch Distributed", VLDB 13(12) 2020, §4.2). Each costs about one kernel launch on the host path,
  :data:`LAUNCH_S` per tensor; the emulated model's tensor count comes from its layer table.
* **per-bucket copies** (charged likewise): without ``gradient_as_bucket_view`` every gradient byte is copied
  into the bucket, divided by the world size in place and copied back (``reducer.cpp``; the default comm hook's
  ``div_``, ``torch/distributed/algorithms/ddp_comm_hooks/default_hooks.py``): :data:`BUCKET_PASSES` = 6 bytes
  read or written per gradient byte, at the GPU's memory bandwidth (datasheets, :data:`MEMORY_GBYTES_PER_S`).
  These kernels run on the compute stream during backward, so they lengthen it.
* **slowest of p** (realised by the engines whenever a profile declares compute jitter: a synchronous
  collective starts when its last member arrives): for the analytical predictions, the expected maximum of p
  mean-1 lognormal step factors (:func:`expected_max_factor`), not their mean.
* **contention** (charged by both engines, and by the analytical predictions): NCCL's kernels occupy streaming
  multiprocessors (one thread block per channel) and memory bandwidth while they overlap backward, so backward runs
  :data:`CONTENTION` slower for as long as a synchronous collective overlaps it (:func:`slowed_finish_s`), and the
  buckets it makes ready later are launched that much later (:mod:`distrepro.timing.contention` charges it). gloo
  collectives (CPU threads) and asynchronous gossip and parameter-server traffic are not charged it: see
  :data:`CONTENTION`.

A profile may set each of these figures, and the backend, in its ``framework:`` block
(:class:`distrepro.hardware.profile_parts.Framework`); :func:`costs` resolves them with the defaults here, and the
sensitivity sweep moves them over :data:`RANGES` (:mod:`distrepro.sensitivity.space`).

The ring/tree step latencies at p GPUs are NCCL's own (:mod:`distrepro.timing.collective_algorithms`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

#: seconds per parameter tensor per step on the host path: one autograd hook plus one copy-kernel launch. CUDA
#: kernel launch costs a few µs of CPU time and PyTorch eager dispatch adds a few more [E]: central 5 µs, range
#: 2-10 µs
LAUNCH_S = 5e-6
#: bytes read or written per gradient byte by DDP's bucket handling: copy in (2), divide in place (2), copy back
#: (2) (``reducer.cpp``, ``default_hooks.py``) [D]; range 4 (a comm hook that fuses the division) to 6
BUCKET_PASSES = 6.0
#: how much slower backward's compute runs while a synchronous NCCL collective runs beside it (a rate: work of w
#: seconds overlapped takes w·(1 + CONTENTION)) [E].
#: Physical argument: NCCL runs each channel as one thread block pinned to a streaming multiprocessor (2-16 channels
#: of the 40-132 SMs of a T4-H100: 2-15 % of the SMs) and its copies and reductions take memory bandwidth
#: (an all-reduce reads and writes about 3 bytes per byte on the wire: 36 GB/s at 12 GB/s InfiniBand, 2-5 % of
#: HBM, up to a fifth of a GDDR6 card's at NVLink rates); central 0.10. Measurement: Lee et al., "Characterizing
#: Compute-Communication Overlap in GPU-Accelerated Distributed Deep Learning: Performance and Power
#: Implications", arXiv:2507.03114 (2025), abstract: compute overlapped with collectives on 4 A100, H100,
#: MI250 and MI210 ran 18.9 % slower on average, 40.0 % at most (GPT and LLaMA layers, whose collectives are
#: larger and more frequent than DDP's buckets); range 0.0-0.4 up to that maximum (an H100 GEMM taking 2x with 24
#: of 132 SMs taken by an all-gather, NVIDIA developer forum thread 337991, is a tail-effect extreme outside it).
#: Not charged: gloo (CPU threads: no SMs to take; the cores they share are not measured) and asynchronous gossip
#: (A²CiD²'s pairwise swaps) or parameter-server traffic, whose NCCL kernels would contend too (0.0-0.4 likewise)
#: but whose charges the A²CiD² and C-ADP reproductions were pre-registered against; charging the all-reduce
#: baseline alone would bias those comparisons, so the acid profiles pin ``framework.contention: 0``.
CONTENTION = 0.10
#: per-step coefficient of variation of one GPU's compute time [E]: clock boost, host jitter, data loading;
#: central 2 %, range 0.5-5 %
STEP_CV = 0.02
#: tensors per parameter-owning layer of the table (weight and bias; BatchNorm's two; a bias-free convolution
#: one) [D]
TENSORS_PER_LAYER = 2.0

#: plausible ranges of the constants above, for the sensitivity sweep and the validation's bounds
RANGES: dict[str, tuple[float, float]] = {
    "LAUNCH_S": (2e-6, 10e-6),
    "BUCKET_PASSES": (4.0, 6.0),
    "CONTENTION": (0.0, 0.4),
    "STEP_CV": (0.005, 0.05),
}

#: device memory bandwidth in GB/s, from the vendors' datasheets [S] (hardware_profiles/README.md cites them):
#: matched against a profile device's name, longest key first
MEMORY_GBYTES_PER_S: dict[str, float] = {
    "a100": 1555.0,  # A100 40GB SXM4/PCIe, HBM2
    "a40": 696.0,  # A40, GDDR6
    "t4": 320.0,  # T4, GDDR6
    "v100": 900.0,  # V100 SXM2, HBM2
    "h100": 3350.0,  # H100 SXM5, HBM3
    "rtx3090": 936.0,  # GeForce RTX 3090, GDDR6X
}

_STD_NORMAL = NormalDist()


@dataclass(frozen=True)
class FrameworkCosts:
    """The framework figures one run is charged with: the profile's ``framework:`` block over the defaults here."""

    backend: str = "nccl"
    contention: float = CONTENTION
    launch_s: float = LAUNCH_S
    bucket_passes: float = BUCKET_PASSES


def costs(profile: Any) -> FrameworkCosts:
    """The framework figures of ``profile`` (a :class:`~distrepro.hardware.profiles.HardwareProfile`): each declared
    one, else its default; contention defaults to :data:`CONTENTION` on NCCL and to 0 on gloo (not charged)."""
    block = getattr(profile, "framework", None)
    backend = profile.backend()

    def pick(name: str, default: float) -> float:
        value = getattr(block, name, None) if block is not None else None
        return default if value is None else float(value)

    launch_us = getattr(block, "launch_us", None) if block is not None else None
    return FrameworkCosts(
        backend=backend,
        contention=pick("contention", CONTENTION if backend == "nccl" else 0.0),
        launch_s=LAUNCH_S if launch_us is None else float(launch_us) / 1e6,
        bucket_passes=pick("bucket_passes", BUCKET_PASSES),
    )


def memory_bandwidth(device_name: str) -> float | None:
    """Bytes/s of the GPU named ``device_name`` (``a100``, ``t4-node3`` ...), None when no datasheet figure matches."""
    name = device_name.lower()
    for key in sorted(MEMORY_GBYTES_PER_S, key=len, reverse=True):
        if name.startswith(key):
            return MEMORY_GBYTES_PER_S[key] * 1e9
    return None


def bucketed_step_overhead_s(device: Any, layers: Any, figures: FrameworkCosts | None = None) -> float:
    """Seconds DDP's reducer adds to one bucketed forward/backward of the emulated model on ``device``: hooks and
    copy launches per tensor, and the bucket copies at the device's memory bandwidth (``figures``: the run's
    framework figures, :func:`costs`; the defaults when None). 0 for a CPU device, a device whose memory bandwidth
    is unknown, or a workload without a layer table (charged as before)."""
    if layers is None or getattr(device, "kind", "gpu") != "gpu":
        return 0.0
    bandwidth = memory_bandwidth(device.name)
    if bandwidth is None:
        return 0.0
    figures = figures or FrameworkCosts()
    counted = [layer for layer in layers.layers if layer.params > 0]
    launches = TENSORS_PER_LAYER * len(counted) * figures.launch_s
    copies = figures.bucket_passes * 4.0 * layers.params / bandwidth
    return launches + copies


def expected_max_factor(p: int, cv: float = STEP_CV) -> float:
    """E[max of p mean-1 lognormal factors of coefficient of variation ``cv``]: what a synchronous step pays for
    per-step jitter on p workers. The density of the largest of p standard normals is p·φ(z)·Φ(z)^(p−1); the
    expectation of exp(σz − σ²/2) under it is integrated numerically (Simpson, z in [−8, 8], 1,600 intervals:
    exact to 1e-9 here). 1 for p = 1 or no jitter."""
    if p <= 1 or cv <= 0:
        return 1.0
    sigma = math.sqrt(math.log1p(cv * cv))
    n, lo, hi = 1600, -8.0, 8.0
    h = (hi - lo) / n
    total = 0.0
    for i in range(n + 1):
        z = lo + i * h
        weight = 1 if i in (0, n) else (4 if i % 2 else 2)
        density = p * _STD_NORMAL.pdf(z) * _STD_NORMAL.cdf(z) ** (p - 1)
        total += weight * density * math.exp(sigma * z - 0.5 * sigma * sigma)
    return total * h / 3


def slowed_finish_s(begin_s: float, work_s: float, busy: list[tuple[float, float]], factor: float) -> float:
    """When ``work_s`` seconds of compute begun at ``begin_s`` end, compute running ``1 + factor`` times slower while
    the communication stream is busy (``busy``: its (start, end) spans, in order and disjoint: one stream runs its
    collectives one after the other).

    The rate reading of a measured slowdown (:data:`CONTENTION`: overlapped compute "ran 18.9 % slower"): a span of
    ``d`` seconds beside compute does ``d / (1 + factor)`` of its work, so it delays compute by
    ``d · factor / (1 + factor)``; compute overlapped from end to end takes ``1 + factor`` times as long."""
    t, left = begin_s, max(0.0, work_s)
    for start, end in busy:
        if start > t:  # the stream idle: compute at full speed up to this span
            if start - t >= left:
                return t + left
            left -= start - t
            t = start
        if end <= t:
            continue
        done = (end - t) / (1.0 + factor)
        if done >= left:
            return t + left * (1.0 + factor)
        left -= done
        t = end
    return t + left


def ddp_step_s(
    compute_s: float,
    backward_fraction: float,
    buckets: list[tuple[float, float]],
    overhead_s: float = 0.0,
    contention: float = CONTENTION,
) -> float:
    """One DDP step, analytically, as the engines charge it (:mod:`distrepro.timing.contention`): ``buckets`` are
    (ready fraction of backward, all-reduce seconds), launched in order on one stream as backward makes them ready;
    backward is lengthened by ``overhead_s`` (the reducer's work) and runs ``1 + contention`` times slower while a
    collective runs beside it (:func:`slowed_finish_s`), which delays the later buckets' launches too; the step ends
    when compute and the last bucket are done. ``contention=0`` and ``overhead_s=0`` give the emulator's earlier
    rule."""
    forward = (1 - backward_fraction) * compute_s
    backward = backward_fraction * compute_s + overhead_s
    comm_end = 0.0
    busy: list[tuple[float, float]] = []
    for ready, seconds in buckets:
        launch = slowed_finish_s(0.0, forward + backward * ready, busy, contention)
        start = max(launch, comm_end)
        comm_end = start + seconds
        busy.append((start, comm_end))
    return max(slowed_finish_s(0.0, forward + backward, busy, contention), comm_end)
