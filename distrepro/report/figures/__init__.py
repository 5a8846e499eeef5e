"""The report's figures, drawn headless (Agg) from the tidy run tables.

Every function takes tables already read from MLflow (:mod:`distrepro.claims.runs`), a run → arm label
map and the report's :class:`ArmStyle` (one colour and position per arm, shared by every figure),
and returns a matplotlib figure, or ``None`` when the runs hold nothing to draw (a method without
allocation metrics, no timeline artifact): a missing panel is better than an empty or misleading
one. :func:`save` writes it. Bands are over seeds (min–max, median line), because with the 2–5 seeds
a reproduction affords a standard-error band would suggest more certainty than there is.

Modules: :mod:`.palette` (arm colours, line styles, markers), :mod:`.figure_style` (sizes, grids,
legends), :mod:`.metric_labels` (metric keys in words with units, for every axis, title and caption),
:mod:`.curves`, :mod:`.claim_figures`, :mod:`.arms` (per-arm bars: time, speedup, communication),
:mod:`.workers` (per-worker panels: timeline, breakdown, allocation), :mod:`.sensitivity_figures`.
"""

from __future__ import annotations

from distrepro.report.figures.arms import comm_figure, speedup_figure, time_figure
from distrepro.report.figures.claim_figures import claim_axis_label, claims_figure
from distrepro.report.figures.curves import curves_figure
from distrepro.report.figures.figure_style import DPI, SPAN_COLORS, VERDICT_COLORS, save
from distrepro.report.figures.metric_labels import MetricLabel, axis_label, describe, shown
from distrepro.report.figures.palette import ArmStyle, arm_style, distinct_colors
from distrepro.report.figures.workers import allocation_figure, breakdown_figure, timeline_figure

__all__ = [
    "DPI", "SPAN_COLORS", "VERDICT_COLORS", "ArmStyle", "MetricLabel", "allocation_figure", "arm_style",
    "axis_label", "breakdown_figure", "claim_axis_label", "claims_figure", "comm_figure", "curves_figure", "describe",
    "distinct_colors", "save", "shown", "speedup_figure", "time_figure", "timeline_figure",
]  # fmt: skip
