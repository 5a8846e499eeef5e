"""``distrepro report PAPER`` and ``distrepro sensitivity PAPER``: judge the claims from MLflow, write the report."""

from __future__ import annotations

import argparse

from distrepro.cli.common import (
    SWEEP_PROGRESS,
    add_sensitivity_args,
    check_output,
    paper_id,
    print_sensitivity,
    verdict_lines,
)


def _cmd_report(args: argparse.Namespace) -> int:
    if args.paper != "adhoc":  # a paper known only to the store is reported too: only a slip's case or folder is read
        args.paper = paper_id(args.paper, strict=False)
    from distrepro.orchestration.heartbeat import Steps, watched  # the standard library only: a line at once

    label = f"report for {args.paper}"
    with watched(Steps(label)) as starting:  # imports: seconds, longer on a loaded machine (then a heartbeat says so)
        starting.enter("opening the tracking store and loading torch, MLflow and matplotlib")
        from distrepro.tracking.mlflow_client import resolve_tracking_uri
        from distrepro.tracking.storeprobe import check_store

        if args.out:
            check_output(args.out, folder=True)
        check_store(args.tracking_uri or resolve_tracking_uri())
        from distrepro.report import stage
        from distrepro.report.build import build_report
        from distrepro.reproduction.report_context import HarnessReportContext

    with stage.watch(label, announce=False):  # a heartbeat names each long step; a refusal stays one line
        report = build_report(
            args.paper,
            out_dir=args.out,
            campaigns=args.campaign,
            tracking_uri=args.tracking_uri,
            baseline=args.baseline,
            log_to_mlflow=not args.no_log,
            scale=args.scale,
            sensitivity=args.sensitivity,
            sensitivity_samples=args.samples,
            dependence=not args.no_sensitivity,
            show_progress=False if args.no_progress else None,
            make_context=HarnessReportContext,  # the hooks' plans and runs come from the harness: it never trains
            exploratory=getattr(args, "exploratory", False),
        )
    claims = report.summary() if report.verdicts else "no claims encoded (runs, figures and environment only)"
    if not report.verdicts and args.paper != "adhoc":
        _say_no_paper_file(args.paper)
    print(f"report for {report.paper}: {claims}")
    for line in verdict_lines(report):
        print(line)
    print_sensitivity(report)
    print(f"  {report.markdown}\n  {report.html}")
    if report.logged_to:
        print(f"  logged under report/ on campaign run(s) {', '.join(report.logged_to)}")
    return 1 if args.check and report.counts()["FAIL"] else 0


def _say_no_paper_file(paper: str) -> None:
    """A report of runs that no ``paper.yaml`` claims (its ``citation.id`` changed after the runs, say) has no
    claims: said on stderr, with the closest ids, instead of a claims-less report passing for a judged one."""
    import sys

    from distrepro.claims.papers import find_paper, known_papers
    from distrepro.errors import did_you_mean

    if find_paper(paper).method_dirs:
        return
    hint = did_you_mean(paper, known_papers()).removeprefix(";")
    print(
        f"distrepro: warning: no paper.yaml declares citation.id '{paper}': the report holds its runs in the store "
        f"with no claims judged (did citation.id change after these runs?{hint})",
        file=sys.stderr,
    )


def add_parser(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    """The ``report`` and ``sensitivity`` subcommands."""
    rep = sub.add_parser(
        "report",
        parents=parents,
        help="judge a paper's claims and write its report from MLflow (no training)",
        description="Read experiment distrepro/PAPER from MLflow (MLFLOW_TRACKING_URI, default "
        "sqlite:///./mlflow.db), judge the claims in the paper's paper.yaml, and write report.md, a "
        "self-contained report.html and figures under reports/PAPER/; the files are also logged under "
        "report/ on the campaign run(s). PAPER 'adhoc' reports the runs of configs without a paper.",
    )
    rep.add_argument("paper", help="paper id (citation.id in methods/*/paper.yaml), or 'adhoc'")
    rep.add_argument(
        "--campaign", action="append", metavar="RUN_ID", help="only runs of this campaign (parent run); repeatable"
    )
    rep.add_argument("--out", help="output folder (default: reports/PAPER)")
    rep.add_argument("--baseline", help="arm for the speedup figure (default: the paper's setup.baseline)")
    rep.add_argument("--tracking-uri", help="MLflow tracking URI (default: MLFLOW_TRACKING_URI or ./mlflow.db)")
    rep.add_argument("--no-log", action="store_true", help="do not log the report files to MLflow")
    rep.add_argument("--check", action="store_true", help="exit with status 1 if any claim FAILS")
    rep.add_argument(
        "--scale",
        choices=["proxy", "mid", "gpu", "paper"],
        help="judge the claims on runs of this scale (default: the paper's)",
    )
    rep.add_argument(
        "--exploratory",
        action="store_true",
        help="judge the runs on seeds outside each scale's pre-registration record, in a report of their own "
        "(default folder reports/PAPER/exploratory; not logged to MLflow); the registered report judges only the "
        "record's seeds",
    )
    add_sensitivity_args(rep)
    rep.add_argument("--no-progress", action="store_true", help=SWEEP_PROGRESS)
    rep.set_defaults(func=_cmd_report)
    sens = sub.add_parser(
        "sensitivity",
        parents=parents,
        help="sweep a paper's timing verdicts over the plausible hardware, then write its report (no training)",
        description="Re-judge PAPER's timing claims over the ranges declared for estimated profile figures and "
        "paper.yaml setup.sensitivity assumptions (Latin hypercube + one-at-a-time scans), re-timing the tracked "
        "runs analytically; writes the report with its sensitivity section (= report --sensitivity).",
    )
    sens.add_argument("paper", help="paper id (citation.id in methods/*/paper.yaml)")
    sens.add_argument("--campaign", action="append", metavar="RUN_ID", help="only runs of this campaign; repeatable")
    sens.add_argument("--out", help="output folder (default: reports/PAPER)")
    sens.add_argument("--tracking-uri", help="MLflow tracking URI (default: MLFLOW_TRACKING_URI or ./mlflow.db)")
    sens.add_argument("--no-log", action="store_true", help="do not log the report files to MLflow")
    sens.add_argument(
        "--scale", choices=["proxy", "mid", "gpu", "paper"], help="judge the claims on runs of this scale"
    )
    add_sensitivity_args(sens, always=True)
    sens.add_argument("--no-progress", action="store_true", help=SWEEP_PROGRESS)
    sens.set_defaults(func=_cmd_report, sensitivity=True, no_sensitivity=False, baseline=None, check=False)
