"""The optimizer's weight update, and how gradient accumulation spreads it over micro-batches.

Why: a published scaling table often keeps the *global* batch fixed and makes it up by gradient accumulation on
fewer GPUs (DeepLearningExamples' GNMT: ``--train-global-batch-size 1024`` at 128 sentence pairs a GPU, so one GPU
runs 8 micro-batches per optimizer step, 4 GPUs 2, 8 GPUs 1). Its throughput is averaged over micro-batches, so
the 1-GPU row pays an eighth of the update per micro-batch and the 8-GPU row all of it. A prediction that takes
the per-micro-batch compute from the 1-GPU row and adds only communication is fast by the difference, whatever the
links. The update is memory-bound elementwise work: its passes over the parameters, counted from the optimizer's
code as bytes read and written per parameter and kernels per tensor (:class:`WeightUpdate`), priced at the GPU's
datasheet bandwidth times :data:`ETA_MEM` plus :data:`distrepro.timing.framework.KERNEL_S` per kernel
(:func:`update_seconds`), the same roofline the eager step uses (``benchmarks/eager_step.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from distrepro.timing.framework import KERNEL_S

#: fraction of datasheet memory bandwidth a streaming elementwise kernel reaches [E], range 0.6-0.9: the figure
#: ``benchmarks/eager_step.py`` (``ETA_MEM``) prices the Decent-DP step's optimizer passes with
ETA_MEM = 0.8


@dataclass(frozen=True)
class WeightUpdate:
    """One optimizer step over a model's parameters, counted from the code that runs it: bytes read and written per
    parameter (Adam's moments, the gradient-norm read of clipping, a master-weight copy, zeroing the gradients) and
    elementwise kernels per parameter tensor; ``source`` says which code was counted."""

    bytes_per_param: float
    kernels_per_tensor: float
    source: str


def update_seconds(update: WeightUpdate, params: float, tensors: float, memory_bytes_per_s: float) -> float:
    """GPU seconds of one weight update: its bytes at ``ETA_MEM`` of the memory bandwidth, plus one
    :data:`KERNEL_S` per kernel (launch and ramp: the small tensors' kernels are launch-bound)."""
    if memory_bytes_per_s <= 0:
        raise ValueError("memory_bytes_per_s must be positive")
    streaming = params * update.bytes_per_param / (ETA_MEM * memory_bytes_per_s)
    return streaming + tensors * update.kernels_per_tensor * KERNEL_S


def accumulation_delta_s(update_s: float, micro_batches: int, reference_micro_batches: int) -> float:
    """Seconds per micro-batch a run that updates every ``micro_batches`` micro-batches pays beyond a reference run
    (the 1-GPU row the compute is taken from) that updates every ``reference_micro_batches``:
    ``update_s · (1/micro_batches − 1/reference_micro_batches)``. Positive when the point accumulates less than its
    reference (more GPUs at a fixed global batch), 0 when both accumulate alike."""
    if micro_batches < 1 or reference_micro_batches < 1:
        raise ValueError("micro-batches per update must be at least 1")
    return update_s * (1.0 / micro_batches - 1.0 / reference_micro_batches)
