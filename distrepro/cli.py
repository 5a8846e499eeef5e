"""``distrepro``: the command line.

    distrepro run CONFIG [--set key.path=value ...] [--seeds 0,1,2] [--no-progress] [--executor local|ray|slurm ...]
    distrepro list                      (paper ids with their arms, methods, datasets, profiles)
    distrepro --version
    distrepro plan CONFIG [--set key.path=value ...] [--json]
    distrepro reproduce PAPER [--seeds 0,1,2] [--with ARMS] [--scale proxy|mid|gpu|paper] [--sensitivity] [--check]
    distrepro extras PAPER [ARM ...]
    distrepro report PAPER [--campaign RUN_ID ...] [--out DIR] [--baseline ARM] [--no-log] [--check] [--sensitivity]
    distrepro sensitivity PAPER [--samples N] [--campaign RUN_ID ...] [--no-progress]   (= report --sensitivity)

Errors a user can cause (bad config, profile, dataset path, unknown method, a tracking store that
cannot be used, a ``--resume`` that does not fit) are printed as one line naming the file, URI or
field, with exit status 2; nothing already logged to MLflow is lost. ``run`` checks the store and
its ``--resume`` target before importing torch or mlflow (seconds on a busy machine), so such a
mistake is reported at once.

Every command takes ``--root DIR`` (repeatable; or ``DISTREPRO_PATH``): a folder of the user's own
``methods/``, ``datasets/``, ``hardware_profiles/`` and ``configs/``, looked up beside the shipped ones.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
import traceback
from collections.abc import Sequence
from pathlib import Path

from distrepro import metrics as M
from distrepro.errors import DistreproError, describe_unexpected


def _cmd_run(args: argparse.Namespace) -> int:
    from distrepro.config.run_config import load_config, parse_seeds
    from distrepro.orchestration.resume import NothingToResume, check_campaign
    from distrepro.tracking.mlflow_client import resolve_tracking_uri
    from distrepro.tracking.storeprobe import check_store

    overrides = list(args.set or [])
    if args.seeds:
        overrides.append(f"seeds={parse_seeds(args.seeds)}")
    if args.engine:
        overrides.append(f"engine={args.engine}")
    uri = resolve_tracking_uri()
    check_store(uri)  # run_campaign checks again; here it comes before the heavy imports (torch, mlflow)
    if args.resume:
        check_campaign(None, uri, args.resume)  # a wrong run id, before the config imports torch
    config = _config_path(args.config)
    cfg = load_config(config, overrides)  # imports the method plugin (and torch) to validate its params
    try:
        if args.resume:
            check_campaign(cfg, uri, args.resume)
        from distrepro.orchestration.campaign import (
            run_campaign,  # after the config and store checks: they fail without MLflow
        )
        from distrepro.orchestration.executors.dispatch import CampaignRequest, run_campaigns
        from distrepro.orchestration.executors.executor_args import spec_from_args
        from distrepro.orchestration.executors.selection import make_executor

        executor = make_executor(spec_from_args(args), [cfg])
        shown = False if args.no_progress else None
        if executor is None:  # --jobs 1: the cells train in this process
            result = run_campaign(
                cfg, source=config, show_progress=shown, resume=args.resume, system_metrics=args.system_metrics
            )
        else:
            request = CampaignRequest(cfg, config, args.resume, system_metrics=args.system_metrics)
            result = run_campaigns([request], executor, shown)[0]
    except NothingToResume as exc:  # not an error: a retried resume of a campaign that got done
        print(f"distrepro: {exc}", file=sys.stderr)
        return 0
    print(f"experiment {result.experiment} · campaign run {result.parent_run_id} · tracking {result.tracking_uri}")
    for cell in result.cells:
        final = cell.result.final
        ttt = cell.result.time_to_target_s
        print(
            f"  seed {cell.seed}: val_acc {final.metrics[M.VAL_ACCURACY]:.4f}  val_loss {final.metrics[M.VAL_LOSS]:.4f}"
            f"  emulated {final.emulated_s:.3f}s  wall {cell.result.wall_s:.1f}s"
            + (f"  time-to-target {ttt:.3f}s" if ttt is not None else "")
            + f"  run {cell.run_id}"
        )
    _print_ui_hint(result.tracking_uri, result.experiment_id, result.parent_run_id)
    return 0


def _config_path(config: str) -> str:
    """``config`` as given, else (a relative path not found here) the file of that name in a plugin root,
    so ``distrepro run configs/quickstart.yaml`` works from any folder, a wheel install included."""
    from distrepro.plugins.roots import find_file

    if Path(config).is_absolute() or Path(config).exists():
        return config
    found = find_file(config)
    return str(found) if found is not None else config


def _print_ui_hint(tracking_uri: str, experiment_id: str, run_id: str | None = None) -> None:
    """Where to look in the MLflow UI; every link opens the "Model training" view (``workflowType``)."""
    from distrepro.tracking.mlflow_client import run_url, ui_url

    served = tracking_uri.startswith(("http://", "https://"))
    base = tracking_uri if served else "http://127.0.0.1:5000"
    if served:
        print(f"runs in the MLflow UI: {ui_url(experiment_id, base)}")
    else:
        print(
            f"runs in the MLflow UI: start it with 'nox -s ui' (or: mlflow ui --host 127.0.0.1 --backend-store-uri "
            f"{tracking_uri}), then open {ui_url(experiment_id, base)}"
        )
    if run_id:
        print(f"  this run: {run_url(experiment_id, run_id, base)}")


def _cmd_list(args: argparse.Namespace) -> int:
    from distrepro.plugins import registry, roots

    _list_papers()
    print("methods:")
    for name, plugin in sorted(registry.methods().items()):
        cite = plugin.paper.get("citation", {})
        kind = plugin.paper.get("kind", "-")
        mode = "lockstep" if plugin.cls.synchronous else "asynchronous"
        print(f"  {name:<14} {kind:<13} {mode:<13} {cite.get('title', '')} ({cite.get('venue', '')})")
    print("datasets:")
    for name, module in sorted(registry.datasets().items()):
        print(f"  {name:<14} {getattr(module, 'DESCRIPTION', '')}")
    print("hardware profiles:")
    from distrepro.hardware.profiles import load_profile

    for name in roots.profile_names():
        try:
            prof = load_profile(name)
            print(f"  {name:<20} {prof.world_size:>3} workers  {prof.description}")
        except DistreproError as exc:
            print(f"  {name:<20} INVALID: {exc}")
    failed = registry.failed_plugins()
    if failed:
        print("plugins that failed to load:")
        for f in failed:
            print(f"  {f.kind} {f.name} ({f.path}): {f.error}")
    return 0


def _list_papers() -> None:
    """``distrepro reproduce <paper id>`` targets, each with its arms (optional ones marked)."""
    from distrepro.claims.papers import find_paper, known_papers

    print("papers (distrepro reproduce PAPER; * = optional arm, run with --with):")
    for paper in known_papers():
        try:
            info = find_paper(paper)
        except DistreproError as exc:
            print(f"  {paper:<14} INVALID: {exc}")
            continue
        arms = info.spec.setup.arms if info.spec is not None else {}
        names = [f"{n}*" if a.optional else n for n, a in arms.items()]
        print(f"  {paper:<14} {info.title}")
        arms_text = f"{len(names)} arms: {', '.join(names) or '-'}"
        wrap = textwrap.TextWrapper(110, initial_indent=" " * 17, subsequent_indent=" " * 19, break_on_hyphens=False)
        print(wrap.fill(arms_text))


def _cmd_report(args: argparse.Namespace) -> int:
    from distrepro.tracking.mlflow_client import resolve_tracking_uri
    from distrepro.tracking.storeprobe import check_store

    check_store(args.tracking_uri or resolve_tracking_uri())
    from distrepro.report.build import build_report

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
        show_progress=False if args.no_progress else None,
    )
    claims = report.summary() if report.verdicts else "no claims encoded (runs, figures and environment only)"
    print(f"report for {report.paper}: {claims}")
    for v in report.verdicts:
        print(f"  {v.verdict:<12} {v.claim_id} [{report.group(v)}]: {v.reason}")
    _print_sensitivity(report)
    print(f"  {report.markdown}\n  {report.html}")
    if report.logged_to:
        print(f"  logged under report/ on campaign run(s) {', '.join(report.logged_to)}")
    return 1 if args.check and report.counts()["FAIL"] else 0


def _print_sensitivity(report: object) -> None:
    result = getattr(report, "sensitivity", None)
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


def _add_sensitivity_args(parser: argparse.ArgumentParser, always: bool = False) -> None:
    if not always:
        parser.add_argument(
            "--sensitivity",
            action="store_true",
            help="add the sweep of the timing verdicts over the plausible hardware (no training)",
        )
    parser.add_argument(
        "--samples", type=int, help="Latin-hypercube settings of the sensitivity sweep (default: the paper's, 256)"
    )


#: --no-progress of the commands that can run the sensitivity sweep (minutes) but train nothing
_SWEEP_PROGRESS = "no live progress bar for the sensitivity sweep (a line per phase on stderr instead)"


def _add_report_parser(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
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
    _add_sensitivity_args(rep)
    rep.add_argument("--no-progress", action="store_true", help=_SWEEP_PROGRESS)
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
    _add_sensitivity_args(sens, always=True)
    sens.add_argument("--no-progress", action="store_true", help=_SWEEP_PROGRESS)
    sens.set_defaults(func=_cmd_report, sensitivity=True, baseline=None, check=False)


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from distrepro.config.run_config import parse_seeds
    from distrepro.orchestration.executors.executor_args import spec_from_args
    from distrepro.tracking.mlflow_client import resolve_tracking_uri
    from distrepro.tracking.storeprobe import check_store

    check_store(resolve_tracking_uri())  # before the configs import torch: a bad store is one line at once
    seeds = ",".join(map(str, parse_seeds(args.seeds))) if args.seeds else None
    from distrepro.orchestration.reproduce import reproduce

    if args.check and args.no_report:
        raise DistreproError("--check judges the claims in the report: it cannot go with --no-report")
    arms = [a.strip() for a in args.arms.split(",")] if args.arms else None
    with_arms = [a.strip() for a in args.with_arms.split(",")] if args.with_arms else None
    result = reproduce(
        args.paper,
        scale=args.scale,
        seeds=seeds,
        overrides=list(args.set or []),
        arms=arms,
        with_arms=with_arms,
        report=not args.no_report,
        show_progress=False if args.no_progress else None,
        sensitivity=args.sensitivity,
        sensitivity_samples=args.samples,
        system_metrics=args.system_metrics,
        executor=spec_from_args(args),
    )
    for arm, campaign in result.campaigns.items():
        print(f"arm {arm}: campaign run {campaign.parent_run_id} ({len(campaign.cells)} seed(s))")
    if result.campaigns:
        first = next(iter(result.campaigns.values()))
        print(f"reproduction run {result.run_id} (the arms are its children; the report is logged on it)")
        _print_ui_hint(first.tracking_uri, first.experiment_id, result.run_id)
    if result.report is not None:
        rep = result.report
        print(f"verdicts: {rep.summary() if rep.verdicts else 'no claims encoded'}")
        for v in rep.verdicts:
            print(f"  {v.claim_id} [{rep.group(v)}]: {v.verdict} — {v.reason}")
        _print_sensitivity(rep)
        print(f"report: {rep.html}\n        {rep.markdown}")
        headline_fails = [v for v in rep.verdicts if v.verdict == "FAIL" and rep.group(v) == "headline"]
        if args.check and headline_fails:
            ids = ", ".join(v.claim_id for v in headline_fails)
            print(f"--check: {len(headline_fails)} headline claim(s) FAIL: {ids}", file=sys.stderr)
            return 1
    return 0


def _cmd_plan(args: argparse.Namespace) -> int:
    import json

    from distrepro.orchestration.plan import build_plan, render

    plan = build_plan(_config_path(args.config), list(args.set or []))
    print(json.dumps(plan, indent=2) if args.json else render(plan))
    return 0


def _cmd_extras(args: argparse.Namespace) -> int:
    from distrepro.orchestration.reproduce import arm_extras

    print(" ".join(arm_extras(args.paper, args.arms)))
    return 0


_DEBUG_HELP = "print the traceback of an error before its one-line message (also DISTREPRO_DEBUG=1)"


def _add_system_metrics_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--system-metrics",
        action="store_true",
        help="log MLflow's system metrics (CPU, memory, disk, network, GPU) in every seed's run, sampled on the "
        "machine that trains it (needs psutil there)",
    )


def _version() -> str:
    """The installed distribution's version (what pip/uv report), else the package's own."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("distrepro")
    except PackageNotFoundError:
        import distrepro

        return distrepro.__version__


def _roots_parser() -> argparse.ArgumentParser:
    """``--root`` and ``--debug``, shared by every command (a parent parser, so they go after the command)."""
    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: not given after the command, it keeps the value given before it (``distrepro --debug run``)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=_DEBUG_HELP)
    common.add_argument(
        "--root",
        action="append",
        metavar="DIR",
        help="a folder with your own methods/, datasets/, hardware_profiles/, configs/, looked up beside the "
        "shipped ones (repeatable; also DISTREPRO_PATH, separated by os.pathsep)",
    )
    return common


def build_parser() -> argparse.ArgumentParser:
    from distrepro.orchestration.executors.executor_args import add_executor_args

    parser = argparse.ArgumentParser(
        prog="distrepro",
        description="Reproduce distributed-training papers on emulated heterogeneous hardware.",
    )
    parser.add_argument("--debug", action="store_true", help=_DEBUG_HELP)
    parser.add_argument("--version", action="version", version=f"distrepro {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    common = [_roots_parser()]  # every command looks plugins up, so every command takes --root
    run = sub.add_parser(
        "run",
        parents=common,
        help="train a config (every seed) and log it to MLflow",
        description="Train a run config once per seed; log to MLflow "
        "(MLFLOW_TRACKING_URI, default sqlite:///./mlflow.db).",
    )
    run.add_argument("config", help="run config YAML (see configs/)")
    run.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a config field, e.g. --set budget.steps=50 --set method_params.lr=0.1",
    )
    run.add_argument("--seeds", help="comma-separated seed indices, e.g. 0,1,2 (overrides the config)")
    run.add_argument("--engine", choices=["inprocess", "dist"], help="execution engine (default: the config's)")
    run.add_argument("--no-progress", action="store_true", help="no live progress bar (a heartbeat line instead)")
    _add_system_metrics_arg(run)
    run.add_argument(
        "--resume",
        metavar="CAMPAIGN_RUN_ID",
        help="continue an unfinished campaign with the same config (--seeds may name some of its seeds): "
        "finished seeds are skipped, the others resume from their latest checkpoint (checkpoint.every_steps, "
        "distributed engine) or start over in a new run",
    )
    add_executor_args(run)
    run.set_defaults(func=_cmd_run)
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
        default="proxy",
        help="proxy (default), mid, gpu or paper scale",
    )
    rep.add_argument("--seeds", help="comma-separated seed indices (default: each config's)")
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
    _add_sensitivity_args(rep)
    rep.add_argument(
        "--no-progress", action="store_true", help="no live progress bar for training or the sensitivity sweep"
    )
    rep.add_argument(
        "--check", action="store_true", help="exit with status 1 if a headline claim (the paper's own) FAILS"
    )
    _add_system_metrics_arg(rep)
    add_executor_args(rep)
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
    pln = sub.add_parser(
        "plan",
        parents=common,
        help="resolve a config without training: allocation, LR, the method's plan, estimated time",
        description="Resolve CONFIG as a run would, without reading data or training, and print the plan.",
    )
    pln.add_argument("config", help="run config YAML (see configs/)")
    pln.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field")
    pln.add_argument("--json", action="store_true", help="machine-readable JSON (config, allocation, lr, ...)")
    pln.set_defaults(func=_cmd_plan)
    lst = sub.add_parser(
        "list", parents=common, help="list the papers (with their arms), methods, datasets and hardware profiles"
    )
    lst.set_defaults(func=_cmd_list)
    _add_report_parser(sub, common)
    from distrepro.training import calibration

    calibration.add_parser(sub, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. Whatever goes wrong is one line on stderr, never a traceback unless ``--debug``: a
    user error (exit 2), Ctrl-C or SIGTERM (128 + the signal: runs KILLED, a resume hint), a bug (exit 1)."""
    from distrepro.orchestration.interrupts import exit_status, interrupted_line, termination_as_interrupt

    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    debug = bool(getattr(args, "debug", False) or os.environ.get("DISTREPRO_DEBUG"))
    if debug:
        os.environ["DISTREPRO_DEBUG"] = "1"  # the distributed engine's ranks and launcher say more too
    with termination_as_interrupt():  # SIGTERM (SLURM, timeout) takes Ctrl-C's path below
        try:
            if args.root:
                from distrepro.plugins.roots import add_roots

                add_roots(args.root)
            return int(args.func(args))
        except DistreproError as exc:
            return _fail(f"distrepro: error: {exc}", 2, debug)
        except KeyboardInterrupt as exc:
            return _fail(interrupted_line(exc, [a for a in argv if a != "--debug"]), exit_status(exc), debug)
        except Exception as exc:
            return _fail(f"distrepro: error: {describe_unexpected(exc)}", 1, debug)


def _fail(line: str, status: int, debug: bool) -> int:
    if debug:
        traceback.print_exc()
    print(line, file=sys.stderr, flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
