"""How a data-parallel implementation cuts the gradients into all-reduce buckets, as its code does (validation).

Why: a bucket's all-reduce can start only once backward has produced every gradient in it, so the bucket size
decides how much of the communication hides behind backward. PyTorch's DDP closes a bucket at ``bucket_cap_mb``
(25 MiB; the first at 1 MiB) [D]. Apex's DDP closes one at ``message_size`` *elements* of the gradients' own type
(default 10,000,000) [D] (NVIDIA/apex@35acb06b ``apex/parallel/distributed.py``: during the first backward a
bucket ships once it holds at least ``message_size`` elements, the leftovers form the last bucket, and from then
on a bucket is all-reduced once every gradient in it is ready). A script may pass either a cap of its own; when
the cap is at least the model, there is one bucket, ready at the end of backward, and its all-reduce runs after
backward instead of beside it.

The engines charge PyTorch's default buckets (:mod:`distrepro.api.overlap`). This module is what the emulator's
validation uses to price each published table with the buckets its own script asked for
(``benchmarks/validate_emulator.py``, a source's or point's ``bucketing:``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: bytes per gradient element the validation's tables use: FP16 or FP32 gradients
ELEMENT_BYTES = (2.0, 4.0)


@dataclass(frozen=True)
class Bucketing:
    """Where one DDP implementation, as a script configured it, closes its buckets: ``cap_bytes`` (``math.inf``:
    one bucket for the whole model) and ``first_cap_bytes`` for the first bucket of backward; ``source`` says
    which code sets them."""

    cap_bytes: float
    first_cap_bytes: float
    source: str

    def __post_init__(self) -> None:
        if not (self.cap_bytes > 0 and self.first_cap_bytes > 0):
            raise ValueError(f"bucket caps must be positive, got {self.cap_bytes} and {self.first_cap_bytes}")

    @classmethod
    def of_elements(cls, elements: float, bytes_per_element: float, source: str) -> Bucketing:
        """Apex's rule: every bucket, the first included, closes at ``elements`` gradient elements."""
        cap = elements * bytes_per_element
        return cls(cap, cap, source)

    def even_plan(self, grad_bytes: float) -> list[tuple[float, float]]:
        """(fraction of backward done when the bucket is ready, its bytes) for each bucket, in backward order, with
        the gradients ready evenly over backward; the last bucket is ready when backward ends."""
        if grad_bytes <= 0:
            return [(1.0, 0.0)]
        plan: list[tuple[float, float]] = []
        done = 0.0
        cap = self.first_cap_bytes
        while grad_bytes - done > cap:
            done += cap
            plan.append((done / grad_bytes, cap))
            cap = self.cap_bytes
        plan.append((1.0, grad_bytes - done))
        return plan

    def in_units(self, scale: float) -> tuple[float, float]:
        """The two caps in the units of a layer table whose bytes are ``scale`` times smaller than the real ones."""
        return self.cap_bytes / scale, self.first_cap_bytes / scale


def bytes_per_element(grad_bytes: float, params: float) -> float:
    """2 or 4: the size of one gradient element, from a table's gradient bytes over its parameter count."""
    ratio = grad_bytes / params
    nearest = min(ELEMENT_BYTES, key=lambda size: abs(size - ratio))
    if not math.isclose(ratio, nearest, rel_tol=0.05):
        raise ValueError(f"{grad_bytes:.4g} gradient bytes over {params:.4g} parameters is neither FP16 nor FP32")
    return nearest
