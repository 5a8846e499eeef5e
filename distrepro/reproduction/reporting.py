"""The report half of a reproduction: the paper's products, then its report over every run of the paper.

Training and judging stay separate: the report reads only what the runs logged. A method folder may also ship
``products.py`` (outputs beyond the arms, such as a figure's grid), built with the report and skipped with it
(``--no-report``): see :func:`build_products`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from distrepro.claims.schema import Scale
from distrepro.orchestration.campaign import CampaignResult
from distrepro.report import stage
from distrepro.report.build import build_report
from distrepro.reproduction.report_context import HarnessReportContext, plugin_context


def build_products(
    method_dirs: list[Path], paper: str, scale: Scale, root: Path | None, out: Path | None = None
) -> list[Path]:
    """Outputs a paper needs beyond its arms' runs, e.g. a figure whose cells are not claims (Decent-DP's Fig. 6
    grid). Each of the paper's method folders with a ``products.py`` has its ``build(ctx)`` called with a
    :class:`distrepro.api.ReportContext` whose output folder is ``reports/<paper>`` (the report's folder); it writes
    files there and returns their paths. The report reads no numbers from them (claims stay data in ``paper.yaml``):
    it shows their figures under the captions the hook's ``describe(ctx)`` declares. ``out``: another report's
    folder (the exploratory report's).
    Products can take minutes (Decent-DP's grid simulates 36 clusters), which a train-only run should not pay."""
    from distrepro.plugins.registry import plugin_module

    made: list[Path] = []
    hooks = [folder for folder in method_dirs if (folder / "products.py").is_file()]
    if hooks:  # a step of its own, before the report's (:mod:`distrepro.report.stage`)
        stage.enter("the method's products", f"of {paper}", total=len(hooks), unit="folder")
    for folder in hooks:
        ctx = plugin_context(out or Path("reports") / paper, scale)
        made += plugin_module(folder.name, "products", root).build(ctx)
        stage.advance()
    return made


def report_reproduction(
    paper: str,
    method_dirs: list[Path],
    campaigns: dict[str, CampaignResult],
    scale: Scale,
    uri: str,
    root: Path | None,
    sensitivity: bool,
    sensitivity_samples: int | None,
    show_progress: bool | None,
    dependence: bool = True,
    exploratory: bool = False,
) -> Any:
    """Build the products and the paper's report, each step named in a line as it starts and by a heartbeat
    (:func:`distrepro.report.stage.watch`, with or without a live bar: the report has none): the report reads every
    run of the paper in the store, so this session's arms add to what earlier sessions (other scales, other arms)
    decided; its files and verdict tags go to this session's campaigns. The method folders' report hooks get the
    harness's context (:class:`HarnessReportContext`): the report itself never trains. ``exploratory``: the session
    ran seeds outside its scale's record; its report (products included) is written apart, in
    ``reports/<paper>/exploratory``, and the registered report's files are left as they are."""
    from distrepro.report.build import exploratory_folder

    with stage.watch(f"report for {paper}"):
        build_products(method_dirs, paper, scale, root, exploratory_folder(paper) if exploratory else None)
        return build_report(
            paper,
            log_campaigns=[c.parent_run_id for c in campaigns.values()],  # reads every run: other scales stay
            tracking_uri=uri,
            root=root,
            scale=scale,
            sensitivity=sensitivity,
            sensitivity_samples=sensitivity_samples,
            show_progress=show_progress,
            dependence=dependence,
            make_context=HarnessReportContext,
            exploratory=exploratory,
        )
