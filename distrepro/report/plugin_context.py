"""The report's side of a method folder's hooks: the sections ``report.py`` adds, the captions ``products.py``
declares, and the context both receive.

The report reads what orchestration produced and never trains, so the context's training services (a config's
plan, a short training run, the code's version) are not made here: whoever builds the report (``distrepro
reproduce``, ``distrepro report``) hands a :class:`HookContextFactory` down, the harness's
:class:`distrepro.reproduction.report_context.HarnessReportContext`. Without one, hooks get a
:class:`ReadingContext`: the folders, the claims and figure saving, and a clear error where they would train.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, Protocol

from distrepro.api.report_context import ClaimView, EvalPoint, Product, ReportContext
from distrepro.claims.papers import PaperInfo
from distrepro.errors import DistreproError
from distrepro.report import stage

_log = logging.getLogger(__name__)


class HookContextFactory(Protocol):
    """Makes the :class:`distrepro.api.ReportContext` a hook receives; the report calls it with its folders."""

    def __call__(self, out_dir: Path, fig_dir: Path, scale: str, claims: Sequence[ClaimView]) -> ReportContext: ...


class NoTrainingHarness(DistreproError):
    """A report hook asked for a plan or a training run, and the report was built without the harness's."""


@dataclass
class ReadingContext:
    """The part of :class:`distrepro.api.ReportContext` the report provides by itself: its folders, the claims
    and saving a figure in the report's style. :meth:`plan`, :meth:`train` and :meth:`code_version` belong to
    the harness above the report (:class:`distrepro.reproduction.report_context.HarnessReportContext` overrides
    them); here they raise :class:`NoTrainingHarness`, so a hook that needs them says why it failed."""

    out_dir: Path
    fig_dir: Path
    scale: str
    claims: Sequence[ClaimView] = field(default_factory=tuple)

    def plan(self, config: Path, overrides: Sequence[str] = ()) -> Mapping[str, Any]:
        _no_harness("plan a config")

    def train(self, config: Mapping[str, Any]) -> list[EvalPoint]:
        _no_harness("train a run")

    def code_version(self, methods: Sequence[str] = ()) -> str:
        _no_harness("tell the code's version")

    def save_figure(self, figure: Any, path: Path) -> Path:
        from distrepro.report.figures.figure_style import save

        return save(figure, path, self.out_dir)


def _no_harness(what: str) -> NoReturn:
    raise NoTrainingHarness(
        f"the report's hook context cannot {what}: this report was built without the training harness "
        "(pass make_context=distrepro.reproduction.report_context.HarnessReportContext, as `distrepro report` "
        "and `distrepro reproduce` do)"
    )


def claim_views(info: PaperInfo | None) -> tuple[ClaimView, ...]:
    """The paper's claims as plain data (id, metric, the acceptance rule's fields)."""
    if info is None or info.spec is None:
        return ()
    return tuple(ClaimView(c.id, str(getattr(c, "metric", "")), c.accept.model_dump()) for c in info.spec.claims)


def hook_context(
    make_context: HookContextFactory | None, info: PaperInfo, out_dir: Path, fig_dir: Path
) -> ReportContext:
    """The context a hook of ``info``'s method folders receives: the report's folders, the paper's own scale and
    its claims, made by ``make_context`` (a :class:`ReadingContext` without one)."""
    scale = info.spec.setup.scale if info.spec else "proxy"
    return (make_context or ReadingContext)(out_dir, fig_dir, scale, claim_views(info))


def method_sections(
    info: PaperInfo, fig_dir: Path, out_dir: Path, make_context: HookContextFactory | None = None
) -> list[tuple[str, dict[str, Path]]]:
    """Sections a paper's method folders add (``report.py`` with ``section(ctx)`` returning markdown and its saved
    figures; ``ctx`` a :class:`distrepro.api.ReportContext` made by ``make_context``): what only the paper needs,
    e.g. QSR's period schedules from its plans.
    A section that fails is reported in its place rather than losing the whole report."""
    out = []
    hooks = [folder for folder in info.method_dirs if (folder / "report.py").is_file()]
    if hooks:
        stage.enter("the method's sections", total=len(hooks), unit="section")
    for folder in hooks:
        try:
            from distrepro.plugins.registry import plugin_module

            ctx = hook_context(make_context, info, out_dir, fig_dir)
            out.append(plugin_module(folder.name, "report").section(ctx))
        except Exception as exc:  # the claims and runs are still worth a report
            _log.warning("report section of %s failed: %s", folder.name, exc)
            out.append((f"_The report section of `{folder.name}` failed: {exc}_\n", {}))
        stage.advance()
    return out


def product_captions(
    info: PaperInfo,
    fig_dir: Path,
    out_dir: Path,
    make_context: HookContextFactory | None = None,
    root: Path | None = None,
) -> dict[str, str]:
    """File name -> caption, as the ``describe(ctx)`` of each of the paper's ``products.py`` declares its files
    (:class:`distrepro.api.Product`). Read when the report is written, not when the products were built: the
    report is rebuilt from disk (``distrepro report``) without building them. A hook without ``describe``, or one
    that fails, leaves its files under the caption that names the hook."""
    captions: dict[str, str] = {}
    for folder in info.method_dirs:
        if not (folder / "products.py").is_file():
            continue
        try:
            from distrepro.plugins.registry import plugin_module

            describe = getattr(plugin_module(folder.name, "products", root), "describe", None)
            if describe is None:
                continue
            declared: Sequence[Product] = describe(hook_context(make_context, info, out_dir, fig_dir))
            captions.update({p.name: p.caption for p in declared})
        except Exception as exc:  # the files still appear, under the caption naming the hook
            _log.warning("the products of %s declare no caption: %s", folder.name, exc)
    return captions
