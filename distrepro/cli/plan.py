"""``distrepro plan CONFIG``: resolve a config as a run would, without training, and print the plan."""

from __future__ import annotations

import argparse

from distrepro.cli.common import config_path


def _cmd_plan(args: argparse.Namespace) -> int:
    import json

    from distrepro.config.overrides import parse_overrides
    from distrepro.orchestration.plan import build_plan, render

    plan = build_plan(config_path(args.config), parse_overrides(args.set))
    print(json.dumps(plan, indent=2) if args.json else render(plan))
    return 0


def add_parser(sub: argparse._SubParsersAction, common: list[argparse.ArgumentParser]) -> None:
    """The ``plan`` subcommand."""
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
