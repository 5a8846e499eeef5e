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
* **contention** (analytical predictions only; the engines do not charge it yet): NCCL's kernels occupy
  streaming multiprocessors (one per channel) and memory bandwidth while they overlap backward, so backward
  runs slower for as long as a collective overlaps it: :data:`CONTENTION` of the overlapped time.

The ring/tree step latencies at p GPUs are NCCL's own (:mod:`distrepro.timing.collective_algorithms`).
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any

#: seconds per parameter tensor per step on the host path: one autograd hook plus one copy-kernel launch. CUDA
#: kernel launch costs a few µs of CPU time and PyTorch eager dispatch adds a few more [E]: central 5 µs, range
#: 2-10 µs
LAUNCH_S = 5e-6
#: bytes read or written per gradient byte by DDP's bucket handling: copy in (2), divide in place (2), copy back
#: (2) (``reducer.cpp``, ``default_hooks.py``) [D]; range 4 (a comm hook that fuses the division) to 6
BUCKET_PASSES = 6.0
#: fraction of overlapped time by which backward slows while a collective runs beside it [E]: NCCL takes one SM
#: per channel (2-16 channels of 40-132 SMs: 2-15 % of the SMs) and part of the memory bandwidth; central 0.1,
#: range 0.0-0.3 (an H100 GEMM taking 2x with 24 of 132 SMs taken by an all-gather is the tail-effect extreme,
#: NVIDIA developer forum thread 337991)
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
    "CONTENTION": (0.0, 0.3),
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


def memory_bandwidth(device_name: str) -> float | None:
    """Bytes/s of the GPU named ``device_name`` (``a100``, ``t4-node3`` ...), None when no datasheet figure matches."""
    name = device_name.lower()
    for key in sorted(MEMORY_GBYTES_PER_S, key=len, reverse=True):
        if name.startswith(key):
            return MEMORY_GBYTES_PER_S[key] * 1e9
    return None


def bucketed_step_overhead_s(device: Any, layers: Any) -> float:
    """Seconds DDP's reducer adds to one bucketed forward/backward of the emulated model on ``device``: hooks and
    copy launches per tensor, and the bucket copies at the device's memory bandwidth. 0 for a CPU device, a
    device whose memory bandwidth is unknown, or a workload without a layer table (charged as before)."""
    if layers is None or getattr(device, "kind", "gpu") != "gpu":
        return 0.0
    bandwidth = memory_bandwidth(device.name)
    if bandwidth is None:
        return 0.0
    counted = [layer for layer in layers.layers if layer.params > 0]
    launches = TENSORS_PER_LAYER * len(counted) * LAUNCH_S
    copies = BUCKET_PASSES * 4.0 * layers.params / bandwidth
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


def contention_s(overlapped_s: float, factor: float = CONTENTION) -> float:
    """Seconds backward loses to collectives running beside it for ``overlapped_s`` seconds."""
    return max(0.0, overlapped_s) * factor


def ddp_step_s(
    compute_s: float,
    backward_fraction: float,
    buckets: list[tuple[float, float]],
    overhead_s: float = 0.0,
    contention: float = CONTENTION,
) -> float:
    """One DDP step, analytically: ``buckets`` are (ready fraction of backward, all-reduce seconds), launched in
    order on one stream as they become ready; backward is lengthened by ``overhead_s`` (the reducer's work) and
    by ``contention`` × the time a collective overlaps it; the step ends when compute and the last bucket are
    done. ``contention=0`` and ``overhead_s=0`` give the emulator's earlier rule."""
    forward = (1 - backward_fraction) * compute_s
    backward = backward_fraction * compute_s + overhead_s
    comm_end = delay = 0.0
    for ready, seconds in buckets:
        start = max(forward + backward * ready + delay, comm_end)
        comm_end = start + seconds
        backward_end = forward + backward + delay
        delay += contention_s(min(comm_end, backward_end) - start, contention)  # later buckets are ready later
    return max(forward + backward + delay, comm_end)
