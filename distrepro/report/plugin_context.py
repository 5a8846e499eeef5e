"""The harness's :class:`distrepro.api.ReportContext`: what a method folder's ``report.py``/``products.py`` may use.

Made here, in the report layer, so that a plugin's hook never imports the runner: the context plans configs
(:func:`distrepro.orchestration.plan.build_plan`), trains short runs (:func:`distrepro.orchestration.campaign.
run_campaign`, first seed) and saves figures in the report's style.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distrepro.api.report_context import ClaimView, EvalPoint
from distrepro.claims.papers import PaperInfo


@dataclass
class HarnessReportContext:
    """:class:`distrepro.api.ReportContext` as the harness provides it."""

    out_dir: Path
    fig_dir: Path
    scale: str
    claims: Sequence[ClaimView] = field(default_factory=tuple)

    def plan(self, config: Path, overrides: Sequence[str] = ()) -> Mapping[str, Any]:
        from distrepro.orchestration.plan import build_plan

        return build_plan(config, list(overrides))

    def train(self, config: Mapping[str, Any]) -> list[EvalPoint]:
        from distrepro.config.run_config import RunConfig
        from distrepro.orchestration.campaign import run_campaign

        result = run_campaign(RunConfig.model_validate(dict(config)), show_progress=False)
        run = result.cells[0].result
        return [EvalPoint(e.step, e.emulated_s, dict(e.metrics)) for e in run.evals]

    def save_figure(self, figure: Any, path: Path) -> Path:
        from distrepro.report.figures.figure_style import save

        return save(figure, path)


def claim_views(info: PaperInfo | None) -> tuple[ClaimView, ...]:
    """The paper's claims as plain data (id, metric, the acceptance rule's fields)."""
    if info is None or info.spec is None:
        return ()
    return tuple(ClaimView(c.id, str(getattr(c, "metric", "")), c.accept.model_dump()) for c in info.spec.claims)


def plugin_context(
    out_dir: Path, scale: str, info: PaperInfo | None = None, fig_dir: Path | None = None
) -> HarnessReportContext:
    """The context a report hook receives: ``out_dir`` the report's folder, figures under ``fig_dir``."""
    return HarnessReportContext(out_dir, fig_dir or out_dir / "figures", scale, claim_views(info))
