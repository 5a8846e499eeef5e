"""From measured step times to a profile entry: the fit behind ``distrepro calibrate`` (and the catalogue).

The engine charges a step of b samples ``t0 + b / peak`` (:mod:`distrepro.timing.compute`): a fixed cost per step
that does not shrink with the batch (kernel launches, small memory-bound kernels, the optimizer, Python) plus a
cost per sample at the device's large-batch speed. A measured curve is therefore fitted to exactly that form, so
that what a profile declares is what the engine charges at every batch, not only at the one that was timed. A
saturating throughput curve ``b / t(b)`` rising to ``peak`` *is* this form; forms with more parameters (a power
law, a knee) would fit a few points better and then need an engine that charges them. How far the form misses
is reported (:attr:`StepFit.worst_residual`), and the entry says so where it misses by more than
:data:`POOR_FIT`.

The fit is weighted least squares on relative error (each point weighted 1/t², since step times span orders of
magnitude and a profile's error is judged relative), with ``t0 >= 0`` (a negative fixed cost has no physical
meaning: the refit through the origin is used instead). Nothing here imports torch; the measuring is in
:mod:`distrepro.training.calibration`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: relative residual above which the entry says that t0 + b/peak describes the measurements poorly
POOR_FIT = 0.10


@dataclass(frozen=True)
class StepFit:
    """``t(b) = t0_s + b / peak_samples_per_s``, fitted to ``points`` (batch, seconds)."""

    t0_s: float
    peak_samples_per_s: float
    points: tuple[tuple[float, float], ...]

    def step_s(self, batch: float) -> float:
        return self.t0_s + batch / self.peak_samples_per_s

    @property
    def residuals(self) -> tuple[float, ...]:
        """Predicted / measured - 1 at each point."""
        return tuple(self.step_s(b) / t - 1 for b, t in self.points)

    @property
    def worst_residual(self) -> float:
        return max((abs(r) for r in self.residuals), default=0.0)


def fit_step_curve(points: Sequence[tuple[float, float]]) -> StepFit:
    """Fit ``t0 + b/peak`` to (batch, step seconds) points: weighted least squares on relative error, t0 >= 0.

    One point (or one distinct batch) cannot separate the two terms: it gives ``t0 = 0`` and the throughput at
    that batch, a lower bound on the large-batch speed (the caller says so).
    """
    pts = tuple((float(b), float(t)) for b, t in points)
    if not pts:
        raise ValueError("no measurements to fit")
    for b, t in pts:
        if not (b > 0 and t > 0 and math.isfinite(b) and math.isfinite(t)):
            raise ValueError(f"batch and step time must be positive and finite, got ({b}, {t})")
    weights = [1.0 / (t * t) for _, t in pts]
    if len({b for b, _ in pts}) >= 2:
        # minimise sum w (t0 + b*k - t)^2 with k = 1/peak: the 2x2 normal equations
        sw = sum(weights)
        sb = sum(w * b for w, (b, _) in zip(weights, pts, strict=True))
        sbb = sum(w * b * b for w, (b, _) in zip(weights, pts, strict=True))
        st = sum(w * t for w, (_, t) in zip(weights, pts, strict=True))
        sbt = sum(w * b * t for w, (b, t) in zip(weights, pts, strict=True))
        det = sw * sbb - sb * sb
        t0 = (st * sbb - sb * sbt) / det
        k = (sw * sbt - sb * st) / det
        if t0 >= 0 and k > 0:
            return StepFit(t0, 1.0 / k, pts)
    # through the origin: minimise sum w (b*k - t)^2
    k = sum(w * b * t for w, (b, t) in zip(weights, pts, strict=True)) / sum(
        w * b * b for w, (b, _) in zip(weights, pts, strict=True)
    )
    return StepFit(0.0, 1.0 / k, pts)


def describe_fit(fit: StepFit) -> str:
    """One clause for a ``source``: the fit, its points and how well the form holds."""
    pts = ", ".join(f"b={b:g}: {t * 1e3:.4g} ms" for b, t in fit.points)
    text = (
        f"t(b) = {fit.t0_s * 1e3:.4g} ms + b / {fit.peak_samples_per_s:.4g} samples/s, weighted least squares on "
        f"relative error over median step times ({pts}); worst residual {fit.worst_residual:.1%}"
    )
    if len({b for b, _ in fit.points}) < 2:
        text += "; one batch size only: t0 set to 0, the speed is that batch's (a lower bound on the peak)"
    elif fit.worst_residual > POOR_FIT:
        text += f"; the form t0 + b/peak misses some points by more than {POOR_FIT:.0%}: treat as approximate"
    return text


def device_entry(
    workload: str, fit: StepFit, device_name: str, kind: str, memory_gib: float, provenance: str
) -> dict[str, Any]:
    """A one-device group for a profile (``nodes[].devices[]``), graded ``[M]``: measured on the machine named."""
    return {
        "name": device_name,
        "kind": kind,
        "count": 1,
        "memory_gib": round(memory_gib, 1),
        "throughput_samples_per_s": {workload: round(fit.peak_samples_per_s, 4)},
        "step_overhead_ms": {workload: round(fit.t0_s * 1e3, 4)},
        "source": f"[M] {workload}: {describe_fit(fit)}; {provenance}",
    }


def merge_entry(existing: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """``existing`` device group with ``new``'s workload added (or replaced) and its source appended."""
    merged = dict(existing)
    for key in ("throughput_samples_per_s", "step_overhead_ms"):
        merged[key] = {**existing.get(key, {}), **new[key]}
    (workload,) = new["throughput_samples_per_s"]
    kept = [part for part in str(existing.get("source", "")).split(" || ") if not part.startswith(f"[M] {workload}:")]
    merged["source"] = " || ".join([*(p for p in kept if p), new["source"]])
    return merged


def single_device_profile(name: str, entry: dict[str, Any]) -> dict[str, Any]:
    """A loadable profile holding one calibrated device; its links are placeholders a user must replace."""
    placeholder = {
        "latency_us": 10,
        "bandwidth_gbytes_per_s": 1,
        "source": "[E] placeholder: distrepro calibrate measures compute only; declare the real links "
        "before charging several ranks",
    }
    return {
        "schema_version": 2,
        "name": name,
        "description": f"one device calibrated with distrepro calibrate ({entry['name']})",
        "sources": ["[M] distrepro calibrate: step times measured on the machine named in the device source"],
        "nodes": [{"name": "node0", "devices": [entry]}],
        "network": {"intra_node": placeholder, "inter_node": placeholder},
    }
