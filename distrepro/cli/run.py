"""``distrepro run CONFIG``: train a config once per seed and log it to MLflow."""

from __future__ import annotations

import argparse
import sys

from distrepro import metrics as M
from distrepro.cli.common import add_system_metrics_arg, config_path, print_ui_hint
from distrepro.cli.executor_flags import add_executor_flags, executor_spec


def _cmd_run(args: argparse.Namespace) -> int:
    from distrepro.orchestration.heartbeat import Steps, watched  # the standard library only: a heartbeat at once

    with watched(Steps(f"run {args.config}")) as starting:  # seconds, more on a loaded machine
        starting.enter("opening the tracking store and loading torch, MLflow and the config's method")
        from distrepro.config.overrides import Override, parse_overrides
        from distrepro.config.run_config import load_config, parse_seeds
        from distrepro.orchestration.resume import NothingToResume, check_campaign
        from distrepro.tracking.mlflow_client import resolve_tracking_uri
        from distrepro.tracking.storeprobe import check_store

        seeds = parse_seeds(args.seeds) if args.seeds is not None else None  # --seeds "": an error, not the config's
        uri = resolve_tracking_uri()
        check_store(uri)  # the campaign checks again; here it comes before the heavy imports (torch, mlflow)
        if args.resume:
            check_campaign(None, uri, args.resume)  # a wrong run id, before the config imports torch
        config = config_path(args.config)
        overrides = parse_overrides(args.set)
        if args.engine:
            overrides.append(Override(("engine",), args.engine))
        cfg = load_config(config, overrides, seeds)  # imports the method plugin (and torch) to validate its params
    try:
        from distrepro.orchestration.execute import RunOptions, execute

        options = RunOptions(
            config,
            executor_spec(args),
            args.resume,
            show_progress=False if args.no_progress else None,
            system_metrics=args.system_metrics,
        )
        result = execute(cfg, options, uri)
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
    print_ui_hint(result.tracking_uri, result.experiment_id, result.parent_run_id)
    return 1 if result.failed else 0  # a failed cell is not a finished campaign, whichever executor ran it


def add_parser(sub: argparse._SubParsersAction, common: list[argparse.ArgumentParser]) -> None:
    """The ``run`` subcommand."""
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
    run.add_argument("--seeds", help="seed indices, e.g. 0,1,2 or 100-109 (overrides the config)")
    run.add_argument("--engine", choices=["inprocess", "dist"], help="execution engine (default: the config's)")
    run.add_argument("--no-progress", action="store_true", help="no live progress bar (a heartbeat line instead)")
    add_system_metrics_arg(run)
    run.add_argument(
        "--resume",
        metavar="CAMPAIGN_RUN_ID",
        help="continue an unfinished campaign with the same config (--seeds may name some of its seeds): "
        "finished seeds are skipped, the others resume from their latest checkpoint (checkpoint.every_steps, "
        "distributed engine) or start over in a new run",
    )
    add_executor_flags(run)
    run.set_defaults(func=_cmd_run)
