"""Allocation rules of Chao, Liao, Gao (arXiv 2111.08272), as pure functions of numbers.

Kept apart from the plugin so the rules can be tested on hand-computed cases without a
harness: equal, static proportional and the damped self-adaptive re-split, all ending in an
integer rounding that keeps the global batch. Reconstructed from the abstract only
(arXiv 2111.08272); see README.md for the evidence grade of every choice.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def normalise(weights: Sequence[float]) -> tuple[float, ...]:
    """Fractions proportional to ``weights`` (which must be finite, >= 0, not all zero)."""
    if not weights or any(not math.isfinite(w) or w < 0 for w in weights):
        raise ValueError(f"weights must be finite and >= 0, got {list(weights)}")
    total = float(sum(weights))
    if total <= 0:
        raise ValueError("weights must not all be zero")
    return tuple(w / total for w in weights)


def round_batches(fractions: Sequence[float], global_batch: int, min_batch: int = 1) -> tuple[int, ...]:
    """Integer per-worker batches, each >= ``min_batch``, summing to exactly ``global_batch``.

    Largest-remainder (Hamilton) rounding of ``fractions·B``: floors first, then one extra sample
    to the workers with the largest fractional parts (ties to the lower rank, so every rank of
    the distributed engine computes the same answer). ``min_batch`` keeps a slow worker in the
    ring with at least one sample, so it still measures its own speed for the next re-split.
    """
    n = len(fractions)
    if global_batch < n * min_batch:
        raise ValueError(f"global batch {global_batch} < {n} workers x min_batch {min_batch}")
    p = normalise(fractions)
    spare = global_batch - n * min_batch  # what is left after every worker's minimum
    exact = [x * spare for x in p]
    out = [min_batch + math.floor(e) for e in exact]
    left = global_batch - sum(out)
    order = sorted(range(n), key=lambda j: (-(exact[j] - math.floor(exact[j])), j))
    for j in order[:left]:
        out[j] += 1
    return tuple(out)


def damp(previous: Sequence[float], target: Sequence[float], alpha: float) -> tuple[float, ...]:
    """``(1-α)·previous + α·target``: one damped step of the re-split (α=1: jump to the target).

    Damping keeps one noisy measurement (a jittery or straggling epoch) from swinging the whole
    split; the fixed point is still ``target``, reached geometrically (error × (1-α) per period).
    """
    if not 0 < alpha <= 1:
        raise ValueError(f"damping alpha must be in (0, 1], got {alpha}")
    if len(previous) != len(target):
        raise ValueError("previous and target shares differ in length")
    return normalise([(1 - alpha) * a + alpha * b for a, b in zip(previous, target, strict=True)])


def adaptive_fractions(previous: Sequence[float], measured: Sequence[float] | None, alpha: float) -> tuple[float, ...]:
    """The self-adaptive rule: shares move towards measured throughput ``v_j / Σ v``.

    ``measured`` are samples per compute-second (waiting excluded), all-gathered so every
    worker holds the same vector; ``None`` or a missing (NaN) entry keeps the previous split,
    since a worker that computed nothing cannot be judged.
    """
    if measured is None or any(not math.isfinite(v) or v <= 0 for v in measured):
        return normalise(previous)
    return damp(normalise(previous), normalise(measured), alpha)


def ideal_time_ratio(speeds: Sequence[float]) -> float:
    """Best (proportional / equal) time ratio without communication: ``n·min v / Σ v``.

    Equal shares finish at the slowest worker's pace, ``(N/n)/min v``; proportional shares all
    finish together after ``N/Σ v``. The best possible reduction is ``1 −`` this.
    """
    return len(speeds) * min(speeds) / float(sum(speeds))
