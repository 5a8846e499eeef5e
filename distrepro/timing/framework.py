"""The costs a framework adds to a data-parallel step, beyond compute and the wire: each from a physical argument.

Why: predictions were fast against every published multi-GPU measurement, even at 2 GPUs and compute-bound,
because the emulator charged a DDP step as compute overlapped with the all-reduce and nothing else. What a real
``DistributedDataParallel`` step adds, term by term (each with a central value and a plausible range, swept by
``distrepro sensitivity`` through the profile's ``overhead`` factor or listed in :data:`RANGES`):

* **the reducer's per-step work** (charged by both engines on a bucketed forward/backward): what a DDP
  implementation runs on the GPU besides the all-reduce, counted from its code as kernels per gradient tensor,
  kernels per bucket and bytes read or written per gradient byte (:class:`Reducer`, :data:`REDUCERS`), priced at
  :data:`KERNEL_S` per kernel and the GPU's memory bandwidth (datasheets, :data:`MEMORY_GBYTES_PER_S`)
  (:func:`reducer_seconds`). PyTorch's reducer (``torch/csrc/distributed/c10d/reducer.cpp``) copies each gradient
  into its bucket with the division by the world size fused into the copy and copies it back after the
  all-reduce: two kernels per tensor, 4 bytes per gradient byte, nothing per bucket on the compute stream (the
  engines' default, :data:`LAUNCH_S`, :data:`BUCKET_PASSES`). apex's ``DistributedDataParallel`` flattens each
  bucket, divides it and unflattens it with one launch each: three kernels per bucket, 6 bytes per gradient byte.
  Li et al., "PyTorch Distributed", VLDB 13(12) 2020, §3.2-4.2, describe the design; the counts are the code's.
* **slowest of p** (realised by the engines whenever a profile declares compute jitter: a synchronous
  collective starts when its last member arrives): for the analytical predictions, the expected maximum of p
  mean-1 lognormal step factors (:func:`expected_max_factor`), not their mean; each factor is the step's jitter
  times its GPU's own speed, which differs from GPU to GPU of one SKU (:data:`SYNC_CV`, :data:`GPU_CV`: a
  published measurement of that spread).
* **contention** (charged by both engines, and by the analytical predictions): NCCL's kernels occupy streaming
  multiprocessors (one thread block per channel) and memory bandwidth while they overlap backward, so backward runs
  :data:`CONTENTION` slower for as long as a synchronous collective overlaps it (:func:`slowed_finish_s`), and the
  buckets it makes ready later are launched that much later (:mod:`distrepro.timing.contention` charges it). gloo
  collectives (CPU threads) and asynchronous gossip and parameter-server traffic are not charged it: see
  :data:`CONTENTION`.

* **the training loop's own per-step work on more than one GPU** (the validation only, per source: no engine runs a
  published training loop): syncs and small collectives a script adds outside DDP when it is distributed, and the
  host-bound ops they expose, counted from its code (:class:`LoopExtras`, :func:`loop_extras_seconds`), priced at
  :data:`HOST_OP_S` per host op and :data:`KERNEL_S` per kernel.

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

#: GPU seconds of one small kernel: launch and ramp of a near-empty grid [E], the figure the eager step's roofline uses
#: (``benchmarks/eager_step.py``; CUDA kernel launch is a few µs); range 1.5-5 µs
KERNEL_S = 2.5e-6
#: GPU seconds per gradient tensor per step of PyTorch's reducer: its two kernels per tensor (the copy into the bucket
#: with the division fused, the copy back), :data:`KERNEL_S` each [D]; range 2-10 µs (a host-bound step pays an eager
#: op's host cost per kernel instead: 12.6 µs measured, ``benchmarks/eager_step.py``)
LAUNCH_S = 2 * KERNEL_S
#: bytes read or written per gradient byte by PyTorch's reducer: the copy into the bucket with the division fused
#: (``at::mul_out``: read 1, write 1) and the copy back after the all-reduce (read 1, write 1) [D]
#: (pytorch/pytorch@ad78a7b3 ``torch/csrc/distributed/c10d/reducer.cpp``, ``mark_variable_ready_dense``: "Divides
#: while copying into the bucket view to save one scan over all the input parameters"; ``finalize_backward`` ->
#: ``copy_bucket_to_grad``); range 4 to 6 (apex's reducer, or a comm hook that divides in a pass of its own)
BUCKET_PASSES = 4.0
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


def product_cv(*cvs: float) -> float:
    """The coefficient of variation of a product of independent mean-1 factors of coefficients ``cvs``:
    ``1 + CV² = Π (1 + cvᵢ²)`` (the second moment of a product of independent factors is the product of theirs)."""
    return math.sqrt(math.prod(1 + cv * cv for cv in cvs) - 1)


#: per-step coefficient of variation of one GPU's compute time [E]: clock boost, host jitter, data loading;
#: central 2 %, range 0.5-5 %
STEP_CV = 0.02
#: coefficient of variation of a GPU's sustained speed from one GPU of a SKU to the next [M]: manufacturing variation
#: under power management (a power-capped GPU settles at its own clock). Sinha et al., "Not All GPUs Are Created
#: Equal: Characterizing Variability in Large-Scale, Accelerator-Rich Systems", arXiv:2208.11035v3, abstract: "8%
#: (max 22%) average performance variation" (SGEMM, ResNet-50, BERT, LAMMPS, PageRank; 90 % of the GPUs of five
#: clusters: V100, RTX 5000, MI60), a variation being the span of the box plot's whiskers over the median,
#: (Q3 + 1.5·IQR − (Q1 − 1.5·IQR)) / Q2 = 4·IQR / Q2 (the authors' artifact, hal-uw/gpu_variability_sc22_artifact
#: ``plot_script/plot_aggregated.py``): 5.40 σ of a normal, so σ = 8 % / 5.40 = 1.48 %. Range 0 (clocks pinned
#: below the power cap) to 22 % / 5.40 = 4.1 %. The paper's SC22 proceedings abstract (four clusters) reports
#: "32% (max 72%)"; the revision does not say how the two figures relate, and only the revision's definition is
#: at hand, so its figure is the one charged. Static: a job's slowest GPU is slow at every step. The validation's
#: analytical predictions charge it (:data:`SYNC_CV`); the engines charge it where a profile declares
#: ``noise.gpu_cv`` (the papers' GPU clusters: Decent-DP's and QSR's profiles), one draw per GPU and seed.
GPU_CV = 0.0148
#: the coefficient of variation of one rank's step factor across the ranks of a job: its GPU's own speed
#: (:data:`GPU_CV`) times the step's jitter (:data:`STEP_CV`), two independent mean-1 factors, so
#: 1 + CV² = (1 + STEP_CV²)(1 + GPU_CV²). The ranks' factors are independent draws of it, so a step that waits for
#: the slowest of p pays :func:`expected_max_factor` at this CV (the validation's analytical predictions, whose
#: one-GPU rows are one draw of a GPU, the median one on average)
SYNC_CV = product_cv(STEP_CV, GPU_CV)
#: tensors per parameter-owning layer of the table (weight and bias; BatchNorm's two; a bias-free convolution
#: one) [D]: the engines' reducer is PyTorch's (:data:`LAUNCH_S`, :data:`BUCKET_PASSES`)
TENSORS_PER_LAYER = 2.0

#: plausible ranges of the constants above, for the sensitivity sweep and the validation's bounds
RANGES: dict[str, tuple[float, float]] = {
    "LAUNCH_S": (2e-6, 10e-6),
    "KERNEL_S": (1.5e-6, 5e-6),
    "BUCKET_PASSES": (4.0, 6.0),
    "CONTENTION": (0.0, 0.4),
    "STEP_CV": (0.005, 0.05),
    "GPU_CV": (0.0, 0.041),
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


@dataclass(frozen=True)
class Reducer:
    """What one DDP implementation runs on the compute stream per step besides the all-reduce, counted from its code:
    kernels per gradient tensor, kernels per bucket, bytes read or written per gradient byte."""

    name: str
    kernels_per_tensor: float
    kernels_per_bucket: float
    passes: float
    source: str


#: the DDP implementations the validation's sources ran (their code names which), each counted from its source
REDUCERS: dict[str, Reducer] = {
    "torch": Reducer(
        "torch",
        2.0,
        0.0,
        BUCKET_PASSES,
        "pytorch/pytorch@ad78a7b3 torch/csrc/distributed/c10d/reducer.cpp: mark_variable_ready_dense (at::mul_out "
        "into the bucket view, division fused), finalize_backward -> copy_bucket_to_grad (grad.copy_); the NCCL "
        "launch per bucket is the all-reduce's own (its base latency)",
    ),
    "apex": Reducer(
        "apex",
        0.0,
        3.0,
        6.0,
        "NVIDIA/apex@35acb06b apex/parallel/distributed.py allreduce_bucket: flatten (one cat), all_reduce, "
        "mul_(1/world_size), unflatten back with multi_tensor_scale (one launch)",
    ),
}


def reducer_seconds(
    reducer: Reducer, tensors: float, buckets: int, grad_bytes: float, memory_bytes_per_s: float | None
) -> float:
    """GPU seconds ``reducer`` adds to a step of ``tensors`` gradient tensors in ``buckets`` buckets, ``grad_bytes`` in
    all: its kernels at :data:`KERNEL_S` each, its passes over the gradients at the GPU's memory bandwidth (no pass
    is charged when the bandwidth is unknown)."""
    kernels = reducer.kernels_per_tensor * tensors + reducer.kernels_per_bucket * buckets
    copies = reducer.passes * grad_bytes / memory_bytes_per_s if memory_bytes_per_s else 0.0
    return kernels * KERNEL_S + copies


#: host seconds of one eager PyTorch op, dispatch and launch from Python [L]: 12.6 µs, ``benchmarks/eager_step.py``
#: (the Decent-DP authors' step at toy widths, CPU time over its kernel count); range 5-25 µs
HOST_OP_S = 12.6e-6


@dataclass(frozen=True)
class LoopExtras:
    """What a training loop does per step *only when it runs on more than one GPU*, outside DDP, counted from its
    code (its 1-GPU row pays everything else): host syncs in all (``syncs_fixed`` plus ``syncs_per_rank`` per rank of
    the group, each a round trip with the GPU idle, e.g. an ``.item()`` of each rank's gathered buffer), gradient
    passes the host issues one op per tensor after such a sync (``exposed_ops_per_tensor``, each reading and writing
    its gradient), and a small all-gather of ``all_gather_bytes`` per rank (0: none)."""

    syncs_fixed: float
    syncs_per_rank: float
    exposed_ops_per_tensor: float
    all_gather_bytes: float
    source: str


def loop_extras_seconds(
    extras: LoopExtras,
    ranks: int,
    tensors: float,
    grad_bytes: float,
    memory_bytes_per_s: float | None,
    all_gather_s: float = 0.0,
) -> float:
    """Seconds ``extras`` add to a step on ``ranks`` GPUs (0 on one GPU): each sync a host op and a small kernel or
    copy with nothing else queued (:data:`HOST_OP_S` + :data:`KERNEL_S`); the per-tensor ops after a sync at the
    host's pace, less the GPU time they take anyway (on one GPU the host issues them while backward still runs, so
    only their GPU time counts there: :data:`KERNEL_S` each and a read and a write of the gradients at the memory
    bandwidth); and the all-gather's own seconds ``all_gather_s`` (its collective cost, priced by the caller)."""
    if ranks <= 1:
        return 0.0
    syncs = extras.syncs_fixed + extras.syncs_per_rank * ranks
    ops = extras.exposed_ops_per_tensor * tensors
    gpu_s = ops * KERNEL_S
    if memory_bytes_per_s:
        gpu_s += extras.exposed_ops_per_tensor * 2.0 * grad_bytes / memory_bytes_per_s
    return syncs * (HOST_OP_S + KERNEL_S) + max(0.0, ops * HOST_OP_S - gpu_s) + all_gather_s


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


def sync_cv(micro_batches: int = 1, step_cv: float = STEP_CV, gpu_cv: float = GPU_CV) -> float:
    """The coefficient of variation of one rank's time between two waits for the other ranks, when it computes
    ``micro_batches`` micro-batches in between: :data:`SYNC_CV` for one (a step synchronised every micro-batch).

    Why: a loop that accumulates gradients without syncing the ranks (PyTorch DDP's ``no_sync()`` on all but an
    update's last micro-batch, and no other collective or cross-rank wait per micro-batch) lets each rank's
    micro-batches run back to back; their jitter, drawn per micro-batch, averages over the k of them (CV
    ``step_cv / √k`` if the draws are independent: the one assumption here, stated; fully correlated draws would
    keep ``step_cv``), while the GPU's own speed (``gpu_cv``) is the same at every micro-batch and does not."""
    if micro_batches < 1:
        raise ValueError(f"micro_batches must be at least 1, got {micro_batches}")
    return product_cv(step_cv / math.sqrt(micro_batches), gpu_cv)


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
