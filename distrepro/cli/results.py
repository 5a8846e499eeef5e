"""``distrepro results``: write RESULTS.md, every paper's current verdicts per scale, from the tracked runs."""

from __future__ import annotations

import argparse
from pathlib import Path


def _cmd_results(args: argparse.Namespace) -> int:
    if args.check:  # compare the file with the checkout only: no store needed
        from distrepro.errors import ConfigError, read_text_file
        from distrepro.report.results_check import check_results

        out = Path(args.out)
        if not out.is_file():  # a missing file was an unexpected FileNotFoundError
            why = "is a folder" if out.is_dir() else "does not exist"
            raise ConfigError(f"--out {args.out}", None, f"{why}: --check reads a RESULTS.md written by 'results'")
        problems, warnings = check_results(read_text_file(out, "RESULTS.md"))
        for line in warnings:
            print(f"warning: {args.out}: {line}")
        for line in problems:
            print(f"{args.out} is stale: {line}")
        return 1 if problems else 0
    from distrepro.cli.common import check_output
    from distrepro.orchestration.heartbeat import Steps, watched
    from distrepro.tracking.mlflow_client import resolve_tracking_uri
    from distrepro.tracking.storeprobe import check_store

    with watched(Steps("results")) as steps:  # a heartbeat names the step when one is long
        steps.enter("opening the tracking store and loading MLflow")
        from distrepro.report.results_file import write_results

        check_output(args.out)
        uri = args.tracking_uri or resolve_tracking_uri()
        check_store(uri)
        written = write_results(Path(args.out), uri, steps=steps)
    print(written)
    return 0


def add_parser(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    """The ``results`` subcommand."""
    res = sub.add_parser(
        "results",
        parents=parents,
        help="write RESULTS.md: every paper's current verdicts per scale, from the tracked runs (no training)",
        description="Read, for every paper and scale, the newest finished `reproduce` run that holds a report in the "
        "MLflow store (MLFLOW_TRACKING_URI, default sqlite:///./mlflow.db) and write its headline tally, every "
        "claim's verdict and statistic, run time, commit and date, with a digest of the paper's paper.yaml and arm "
        "configs and one per input a pre-registration freezes (setup, profiles, error band, emulator and claims "
        "code). Papers without such a run are listed as not yet run.",
    )
    res.add_argument("--out", default="RESULTS.md", help="the file to write (default: RESULTS.md)")
    res.add_argument("--tracking-uri", help="MLflow tracking URI (default: MLFLOW_TRACKING_URI or ./mlflow.db)")
    res.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 when the file's recorded inputs no longer match the checkout (paper.yaml, configs, "
        "profiles, error band, emulator and claims code), one line per paper and input; a section written before "
        "inputs were frozen is a warning",
    )
    res.set_defaults(func=_cmd_results)
