"""What a method folder's report hooks receive from the harness: plugins declare, the harness runs.

A paper's method folder may add a section to its report (``report.py``: ``section(ctx) -> (markdown, figures)``)
and outputs beyond the arms' runs (``products.py``: ``build(ctx) -> paths``, e.g. Decent-DP's Fig. 6 grid, and
``describe(ctx) -> [Product]``, the caption the report shows under each). Both get a :class:`ReportContext` made
by the harness (the reproduction and ``distrepro report`` make it, :mod:`distrepro.reproduction.report_context`):
its folders, the paper's claims as data, and the few harness services such a hook needs (a config's plan, a short
training run, saving a figure, the version of the code a run depends on, to key a cache). A hook imports nothing
of the harness beyond :mod:`distrepro.api`, so the contract stays this small whatever the runner does.
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


@dataclass(frozen=True)
class Product:
    """A file a products hook writes into the report's folder, and the caption the report shows under it.

    Declared by ``describe(ctx)`` in ``products.py``, not returned by ``build``: ``distrepro report`` rebuilds the
    report from what is on disk and never calls ``build`` (it may train for minutes), so the caption has to be
    known without building. A PNG nobody declares still appears, under a caption that says which hook wrote it."""

    #: the file's name inside ``ctx.out_dir`` (``fig6.png``)
    name: str
    #: what the figure shows, one sentence without its final period (the report adds where its numbers are)
    caption: str


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
        """Train a run config (a mapping in the run-config format) for its first seed; its evaluations in order.
        The run is logged to ``distrepro/<config's paper>`` and prints nothing: the hook shows its own progress."""
        ...

    def code_version(self, methods: Sequence[str] = ()) -> str:
        """A digest of everything :meth:`train` measures with besides the config: the harness's own code (emulated
        time, hardware, engines, models, config defaults, this contract), the hardware profiles and workloads, and
        the code of the method plugins named in ``methods`` (folder names, e.g. ``("ar_sgd", "decentdp")``). Equal
        digests, equal results: a hook keys its cache on it rather than hashing the harness's files itself, which
        would tie it to the harness's layout."""
        ...

    def save_figure(self, figure: Any, path: Path) -> Path:
        """Write a matplotlib figure as the report's figures are written (same DPI and layout); returns ``path``."""
        ...
