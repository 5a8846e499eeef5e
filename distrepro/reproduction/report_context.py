"""The harness's :class:`distrepro.api.ReportContext`: what a method folder's ``report.py``/``products.py`` may use.

Made here, above the report, because its services train: it plans configs
(:func:`distrepro.orchestration.plan.build_plan`), trains short runs (:func:`distrepro.orchestration.campaign.
run_campaign`, first seed) and tells the version of the code such a run depends on (:func:`code_version`). The
report reads what was trained and never trains itself, so it only receives this context (``make_context`` of
:func:`distrepro.report.build.build_report`) from ``distrepro reproduce`` and ``distrepro report``; what it
provides itself (folders, claims, figure saving) is :class:`distrepro.report.plugin_context.ReadingContext`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import distrepro
from distrepro.api.report_context import EvalPoint
from distrepro.claims.papers import PaperInfo
from distrepro.report.plugin_context import ReadingContext, claim_views

#: the harness's packages whose code decides what a training run measures: the emulated clock and its charges,
#: the hardware the clock reads, the engines that step it, the collectives and gossip a method calls (``api``), the
#: models, optimizers and batch split (``training``) and the run config's defaults (``config``). Not the runner
#: (``orchestration``) nor the data loaders: they decide where and how a run goes, not what it measures.
TRAINING_CODE = ("timing", "hardware", "engine", "api", "training", "config")
#: the files of a hardware profiles folder that are read (profiles and the workload table)
_PROFILE_SUFFIXES = (".yaml", ".yml", ".json")


class HarnessReportContext(ReadingContext):
    """:class:`distrepro.api.ReportContext` as the harness provides it: the report's reading context plus the
    services that plan and train."""

    def plan(self, config: Path, overrides: Sequence[str] = ()) -> Mapping[str, Any]:
        from distrepro.orchestration.plan import build_plan

        return build_plan(config, list(overrides))

    def train(self, config: Mapping[str, Any]) -> list[EvalPoint]:
        from distrepro.config.run_config import RunConfig
        from distrepro.orchestration.campaign import run_campaign
        from distrepro.orchestration.progress import silenced

        with silenced():  # the hook prints its own progress line per run (e.g. Fig. 6's cell counter)
            result = run_campaign(RunConfig.model_validate(dict(config)), show_progress=False)
        run = result.cells[0].result
        return [EvalPoint(e.step, e.emulated_s, dict(e.metrics)) for e in run.evals]

    def code_version(self, methods: Sequence[str] = ()) -> str:
        return code_version(methods)


def code_sources(methods: Sequence[str] = ()) -> list[Path]:
    """The files a run's result depends on besides its config, in a fixed order: the code (``*.py``) of the named
    method plugins (by name), the harness's :data:`TRAINING_CODE` packages, and the hardware profiles and
    workloads the harness loads (the profiles folder, then each plugin root's)."""
    from distrepro.errors import PluginError
    from distrepro.hardware.profiles import profiles_dir
    from distrepro.plugins.registry import method_dirs
    from distrepro.plugins.roots import roots

    folders = method_dirs()
    unknown = sorted(set(methods) - set(folders))
    if unknown:
        raise PluginError(f"code_version: no method plugin named {', '.join(unknown)}; known: {', '.join(folders)}")
    found = [f for name in sorted(set(methods)) for f in sorted(folders[name].glob("*.py"))]
    package = Path(distrepro.__file__).resolve().parent
    for sub in TRAINING_CODE:
        found += sorted((package / sub).rglob("*.py"))
    for profiles in dict.fromkeys([profiles_dir(), *(root / "hardware_profiles" for root in roots())]):
        if profiles.is_dir():
            found += sorted(f for f in profiles.rglob("*") if f.is_file() and f.suffix in _PROFILE_SUFFIXES)
    return found


def code_version(methods: Sequence[str] = ()) -> str:
    """sha256 over the names and contents of :func:`code_sources`: equal versions, equal training results."""
    digest = hashlib.sha256()
    for path in code_sources(methods):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def plugin_context(
    out_dir: Path, scale: str, info: PaperInfo | None = None, fig_dir: Path | None = None
) -> HarnessReportContext:
    """The context a hook receives: ``out_dir`` the report's folder, figures under ``fig_dir``."""
    return HarnessReportContext(out_dir, fig_dir or out_dir / "figures", scale, claim_views(info))
