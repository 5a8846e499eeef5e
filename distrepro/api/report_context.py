"""What a method folder's report hooks receive from the harness: plugins declare, the harness runs.

A paper's method folder may add a section to its report (``report.py``: ``section(ctx) -> (markdown, figures)``)
and outputs beyond the arms' runs (``products.py``: ``build(ctx) -> paths``, e.g. Decent-DP's Fig. 6 grid). Both
get a :class:`ReportContext` made by the harness (:mod:`distrepro.report.plugin_context`): its folders, the
paper's claims as data, and the few harness services such a hook needs (a config's plan, a short training run,
saving a figure). A hook imports nothing of the harness beyond :mod:`distrepro.api`, so the contract stays this
small whatever the runner does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


@dataclass(frozen=True)
class ClaimView:
    """One claim of the paper as its ``paper.yaml`` states it: id, metric and the acceptance rule's fields."""

    id: str
    metric: str
    accept: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EvalPoint:
    """One evaluation of a training run a hook started: global step, emulated seconds and the metrics."""

    step: int
    emulated_s: float
    metrics: Mapping[str, float] = field(default_factory=dict)


class ReportContext(Protocol):
    """The harness's side of a report hook (see the module docstring)."""

    #: the report's folder (``reports/<paper>``): products write here
    out_dir: Path
    #: where the report's figures go (a subfolder of ``out_dir``)
    fig_dir: Path
    #: the scale being reported (``proxy``, ``mid``, ``gpu``, ``paper``)
    scale: str
    #: the paper's claims, in ``paper.yaml`` order
    claims: Sequence[ClaimView]

    def plan(self, config: Path, overrides: Sequence[str] = ()) -> Mapping[str, Any]:
        """What ``distrepro plan CONFIG`` computes (keys ``lr``, ``method_plan``, ``time``, ...), without training."""
        ...

    def train(self, config: Mapping[str, Any]) -> list[EvalPoint]:
        """Train a run config (a mapping in the run-config format) for its first seed; its evaluations in order."""
        ...

    def save_figure(self, figure: Any, path: Path) -> Path:
        """Write a matplotlib figure as the report's figures are written (same DPI and layout); returns ``path``."""
        ...
