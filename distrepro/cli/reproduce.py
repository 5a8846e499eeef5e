"""``distrepro reproduce PAPER``: every arm of a paper, then its report; ``distrepro extras PAPER ARM...``."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import TYPE_CHECKING

from distrepro.cli.common import (
    add_sensitivity_args,
    add_system_metrics_arg,
    paper_id,
    print_sensitivity,
    print_ui_hint,
    verdict_lines,
)
from distrepro.cli.executor_flags import add_executor_flags, executor_spec
from distrepro.errors import DistreproError

if TYPE_CHECKING:
    from distrepro.config.overrides import Override
    from distrepro.orchestration.campaign import CampaignResult
    from distrepro.reproduction.reproduce import Reproduction


def _cmd_reproduce(args: argparse.Namespace) -> int:
    args.paper = paper_id(args.paper)  # a slip is one line with the closest ids, before torch or mlflow is imported
    from distrepro.orchestration.heartbeat import Steps, watched  # the standard library only: a line at once

    with watched(Steps(f"reproduce {args.paper}")) as starting:  # seconds, more on a loaded machine: a heartbeat
        starting.enter("opening the tracking store and loading torch and MLflow")
        from distrepro.config.overrides import parse_overrides
        from distrepro.config.run_config import parse_seeds
        from distrepro.tracking.mlflow_client import resolve_tracking_uri
        from distrepro.tracking.storeprobe import check_store

        check_store(resolve_tracking_uri())  # before the configs import torch: a bad store is one line at once
        seeds = tuple(parse_seeds(args.seeds)) if args.seeds is not None else None
        overrides = parse_overrides(args.set)  # each --set read once, here; every arm's config receives the values
        importlib.import_module("distrepro.reproduction.reproduce")  # torch, MLflow, the engines: the slow part
    if args.check and args.no_report:
        raise DistreproError("--check judges the claims in the report: it cannot go with --no-report")
    arms = [a.strip() for a in args.arms.split(",")] if args.arms else None
    with_arms = [a.strip() for a in args.with_arms.split(",")] if args.with_arms else None
    from distrepro.reproduction.resume import NothingToResume

    try:
        result = _reproduce(args, seeds, overrides, arms, with_arms)
    except NothingToResume as exc:  # not an error: a retried resume of a reproduction that got done
        print(f"distrepro: {exc}", file=sys.stderr)
        return 0
    for arm, campaign in result.campaigns.items():
        print(f"arm {arm}: campaign run {campaign.parent_run_id}{_seeds_note(campaign, arm in result.skipped)}")
    if result.campaigns:
        first = next(iter(result.campaigns.values()))
        print(
            f"reproduction run {result.run_id} (in the runs table, the row after its arms, which name it in their tag "
            "distrepro.reproduction; the report is logged on it)"
        )
        print_ui_hint(first.tracking_uri, first.experiment_id, result.run_id, result.exploratory)
    if result.report is not None:
        rep = result.report
        print(f"verdicts: {rep.summary() if rep.verdicts else 'no claims encoded'}")
        for line in verdict_lines(rep):
            print(line)
        print_sensitivity(rep)
        print(f"report: {rep.html}\n        {rep.markdown}")
        headline_fails = [r for r in rep.display().rows if r.word == "FAIL" and r.group == "headline"]
        if args.check and headline_fails:
            ids = ", ".join(r.claim_id for r in headline_fails)
            print(f"--check: {len(headline_fails)} headline claim(s) FAIL: {ids}", file=sys.stderr)
            return 1
    return 0


def _seeds_note(campaign: CampaignResult, skipped: bool) -> str:
    """`` (N seed(s))``: the seeds the verdicts read, every FINISHED seed of the campaign (after a resume, those of
    earlier sessions too), and how many of them trained in this session when that is fewer."""
    if skipped:
        return " (finished before: skipped)"
    used = len(campaign.finished_seeds) or len(campaign.cells)
    now = len(campaign.cells)
    return f" ({used} seed(s))" if now == used else f" ({used} seed(s), {now} trained in this session)"


def _reproduce(
    args: argparse.Namespace,
    seeds: tuple[int, ...] | None,
    overrides: list[Override],
    arms: list[str] | None,
    with_arms: list[str] | None,
) -> Reproduction:
    from distrepro.reproduction.reproduce import LATEST, reproduce

    return reproduce(
        args.paper,
        scale=args.scale,
        seeds=seeds,
        overrides=overrides,
        arms=arms,
        with_arms=with_arms,
        report=not args.no_report,
        show_progress=False if args.no_progress else None,
        sensitivity=args.sensitivity,
        sensitivity_samples=args.samples,
        dependence=not args.no_sensitivity,
        system_metrics=args.system_metrics,
        executor=executor_spec(args),
        resume=LATEST if args.resume == "" else args.resume,
    )


def _cmd_extras(args: argparse.Namespace) -> int:
    args.paper = paper_id(args.paper)
    from distrepro.reproduction.selection import arm_extras

    print(" ".join(arm_extras(args.paper, args.arms)))
    return 0


def add_parser(sub: argparse._SubParsersAction, common: list[argparse.ArgumentParser]) -> None:
    """The ``reproduce`` and ``extras`` subcommands."""
    rep = sub.add_parser(
        "reproduce",
        parents=common,
        help="run every arm of a paper (paper.yaml setup.arms), then write its report",
        description="Run one campaign per arm of PAPER's claims (every seed), then build reports/PAPER/.",
    )
    rep.add_argument("paper", help="paper id (citation.id in a method's paper.yaml)")
    rep.add_argument(
        "--scale",
        choices=["proxy", "mid", "gpu", "paper"],
        help="proxy (default), mid, gpu or paper scale",
    )
    rep.add_argument(
        "--resume",
        nargs="?",
        const="",
        metavar="RUN_ID",
        help="continue a reproduction that stopped: its unfinished arms (their finished seeds skipped), then the "
        "report; RUN_ID is its reproduction run, default the newest of PAPER at --scale in the store",
    )
    rep.add_argument(
        "--seeds",
        help="seed indices, e.g. 0,1,2 or 100-109 (default: the seeds pre-registered for the scale, else each "
        "config's)",
    )
    rep.add_argument("--arms", help="comma-separated arms to run (default: every arm not marked optional)")
    rep.add_argument(
        "--with",
        dest="with_arms",
        metavar="ARMS",
        help="comma-separated optional arms to run as well (e.g. cadp's deepspeed_real: pip extra + dist engine)",
    )
    rep.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a field in every arm's config")
    rep.add_argument(
        "--no-report",
        action="store_true",
        help="train only: no report and no report products (a method's products.py, e.g. decentdp's Fig. 6 grid)",
    )
    add_sensitivity_args(rep)
    rep.add_argument(
        "--no-progress", action="store_true", help="no live progress bar for training or the sensitivity sweep"
    )
    rep.add_argument(
        "--check", action="store_true", help="exit with status 1 if a headline claim (the paper's own) FAILS"
    )
    add_system_metrics_arg(rep)
    add_executor_flags(rep)
    rep.set_defaults(func=_cmd_reproduce)
    ext = sub.add_parser(
        "extras",
        parents=common,
        help="print the pip extras that optional arms of a paper need (used by the nox sessions)",
        description="Print, space-separated, the pip extras (setup.arms.<arm>.extra in paper.yaml) that the "
        "named arms of PAPER need; nothing when none do.",
    )
    ext.add_argument("paper", help="paper id (citation.id in a method's paper.yaml)")
    ext.add_argument("arms", nargs="*", help="arm names")
    ext.set_defaults(func=_cmd_extras)
