"""Helpers several subcommands share: where a config is, where to look in the MLflow UI, shared flags, the
sensitivity summary lines."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def config_path(config: str) -> str:
    """``config`` as given, else (a relative path not found here) the file of that name in a plugin root,
    so ``distrepro run configs/quickstart.yaml`` works from any folder, a wheel install included. A config found
    nowhere is one line with the closest configs of the roots (before anything imports torch)."""
    from distrepro.plugins.roots import find_file

    if Path(config).is_absolute() or Path(config).exists() or Path(config).is_symlink():
        return config
    found = find_file(config)
    if found is not None:
        return str(found)
    from distrepro.errors import ConfigError
    from distrepro.plugins.catalog import config_hint

    raise ConfigError(config, None, f"run config not found{config_hint(config)}")


def paper_id(name: str, strict: bool = True) -> str:
    """The paper id ``name`` means (:func:`distrepro.plugins.catalog.resolve_paper`: the id up to case, or the paper
    of a method folder, said on stderr); an unknown one is one line with the closest ids, from the ``paper.yaml``
    files alone, before the command imports torch or mlflow."""
    import sys

    from distrepro.plugins.catalog import resolve_paper

    paper, note = resolve_paper(name, strict=strict)
    if note:
        print(f"distrepro: {note}", file=sys.stderr)
    return paper


def print_ui_hint(tracking_uri: str, experiment_id: str, run_id: str | None = None, exploratory: bool = False) -> None:
    """Where to look in the MLflow UI; every link opens the "Model training" view (``workflowType``), the runs
    table in distrepro's view of the confirmatory runs (``exploratory``: of the exploratory ones)."""
    from distrepro.tracking.mlflow_client import resolve_tracking_uri
    from distrepro.tracking.ui_view import run_url, ui_url

    served = tracking_uri.startswith(("http://", "https://"))
    base = tracking_uri if served else "http://127.0.0.1:5000"
    table = ui_url(experiment_id, base, exploratory)
    if served:
        print(f"runs in the MLflow UI: {table}")
    else:
        store = "" if tracking_uri == resolve_tracking_uri() else f" --store {tracking_uri}"
        print(f"runs in the MLflow UI: start it with 'distrepro ui{store}', then open {table}")
    if run_id:
        print(f"  this run: {run_url(experiment_id, run_id, base)}")


def add_system_metrics_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--system-metrics",
        action="store_true",
        help="log MLflow's system metrics (CPU, memory, disk, network, GPU) in every seed's run, sampled on the "
        "machine that trains it (needs psutil there)",
    )


def verdict_lines(report: Any) -> list[str]:
    """The console's line per claim, from the report's shown verdicts (:mod:`distrepro.claims.shown`): the same word,
    what it is evidence about, its unit and qualifiers as the report files, then the reason."""
    shown = report.display()
    lines = []
    for v in report.verdicts:
        row = shown.of(v.claim_id)
        quals = f" ({'; '.join(row.qualifiers)})" if row.qualifiers else ""
        lines.append(f"  {row.word:<12} {row.claim_id} [{row.tags()}]: {row.said}{quals} — {v.reason}")
    return lines


def print_sensitivity(report: object) -> None:
    result = getattr(report, "sensitivity", None)
    checked = getattr(report, "dependence", None)
    if result is None and checked is not None:  # the default check (distrepro.report.dependence_section)
        from distrepro.report.dependence_section import summary_line as checked_line

        print(checked_line(checked, getattr(report, "verdicts", None)))
    if result is None:
        return
    from distrepro.report.sensitivity_section import summary_line

    if not result.claims:
        print(f"sensitivity: no timing claim could be swept ({len(result.skipped)} not swept)")
    else:
        print(
            f"sensitivity: {result.samples} settings of {len(result.space.variables)} uncertain figures, "
            f"analytical vs logged times at central values within {result.max_validation_error():.1e}"
        )
    for c in result.claims:
        print(f"  {summary_line(c, result.space, result.samples)}")
    for cid, why in sorted(result.skipped.items()):
        print(f"  {cid}: not swept ({why})")


def add_sensitivity_args(parser: argparse.ArgumentParser, always: bool = False) -> None:
    if not always:
        parser.add_argument(
            "--sensitivity",
            action="store_true",
            help="add the sweep of the timing verdicts over the plausible hardware (no training)",
        )
        parser.add_argument(
            "--no-sensitivity",
            action="store_true",
            help="skip the default check that marks timing verdicts depending on an assumed hardware figure "
            "(a Latin hypercube of 32 settings, cached in the report folder)",
        )
    parser.add_argument(
        "--samples",
        type=int,
        help="Latin-hypercube settings of the sensitivity sweep (default: the paper's, 256) or of the default check "
        "of the timing verdicts (default 32)",
    )


#: --no-progress of the commands that can run the sensitivity sweep (minutes) but train nothing
SWEEP_PROGRESS = "no live progress bar for the sensitivity sweep (a line per phase on stderr instead)"


def check_output(path: str | Path, flag: str = "--out", folder: bool = False) -> None:
    """Refuse an output ``path`` (a file, or with ``folder`` a folder) this process cannot write, in one line naming
    ``flag``, before the command works for minutes and then fails with an ``OSError`` deep in a writer."""
    from distrepro.errors import DistreproError
    from distrepro.tracking.storeprobe import cannot_create

    target = Path(path)
    where = target if folder else target.parent
    if folder and target.exists() and not target.is_dir():
        raise DistreproError(f"{flag} {path}: is a file, not a folder")
    if not folder and target.is_dir():
        raise DistreproError(f"{flag} {path}: is a folder, not a file")
    blocker = next((p for p in (where, *where.parents) if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        raise DistreproError(f"{flag} {path}: cannot write there: {blocker} is a file, not a folder")
    reason = cannot_create(where)
    if reason is None and not folder and target.exists():
        try:
            with target.open("r+b"):
                pass
        except OSError as exc:
            reason = f"{exc.strerror or exc} ({target})"
    if reason is not None:
        raise DistreproError(f"{flag} {path}: cannot write there: {reason}")
