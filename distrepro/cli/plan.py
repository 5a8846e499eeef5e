"""``distrepro plan PAPER [--scale S]`` and ``distrepro plan CONFIG``: what runs would cost, without training.

A paper id plans every arm and seed ``reproduce`` would run at the scale, with totals in emulated hours, device-hours
and GPU-hours (:mod:`distrepro.reproduction.paper_plan`); a run config file is resolved as a run would be and its
plan printed (:mod:`distrepro.orchestration.plan`). Which of the two is said from the name alone, before torch is
imported, and a name that is neither is one line with the closest paper ids and configs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from distrepro.cli.common import config_path
from distrepro.errors import DistreproError


def _is_config(target: str) -> bool:
    """A file, or a name that can only be one (``.yaml``, or a path with a folder): else a paper id."""
    return target.endswith((".yaml", ".yml")) or "/" in target or Path(target).is_file()


def _paper(target: str) -> str:
    """The paper id ``target`` names; an unknown one is one line with the closest ids, or the closest config."""
    import sys

    from distrepro.plugins.catalog import config_hint, papers, resolve_paper

    try:
        paper, note = resolve_paper(target)
    except DistreproError as exc:
        hint = "" if "did you mean" in str(exc) else config_hint(target)
        raise DistreproError(f"plan: {exc}{hint} (plan takes a paper id or a run config file)") from None
    if note:
        print(f"distrepro: {note}", file=sys.stderr)
    if not papers()[paper].reproducible:
        raise DistreproError(f"plan: paper '{paper}' has no setup.arms to plan (plan a run config file instead)")
    return paper


def _cmd_plan(args: argparse.Namespace) -> int:
    import json

    if _is_config(args.target):
        if args.scale is not None:
            raise DistreproError(
                f"--scale goes with a paper id; {args.target} is a run config, planned as it is "
                "(a scale's recipe is its sibling file, e.g. qsr.paper.yaml)"
            )
        path = config_path(args.target)
        from distrepro.config.overrides import parse_overrides
        from distrepro.orchestration.plan import build_plan, render

        plan = build_plan(path, parse_overrides(args.set))
        print(json.dumps(plan, indent=2) if args.json else render(plan))
        return 0
    paper = _paper(args.target)
    from distrepro.config.overrides import parse_overrides
    from distrepro.reproduction.paper_plan import plan_paper, render_paper_plan

    planned = plan_paper(paper, args.scale or "proxy", parse_overrides(args.set))
    print(json.dumps(planned, indent=2) if args.json else render_paper_plan(planned))
    return 0


def add_parser(sub: argparse._SubParsersAction, common: list[argparse.ArgumentParser]) -> None:
    """The ``plan`` subcommand."""
    pln = sub.add_parser(
        "plan",
        parents=common,
        help="price a paper's reproduction (every arm and seed, GPU-hours) or resolve one run config, without training",
        description="PAPER: every arm and seed 'distrepro reproduce PAPER --scale S' would run, each arm's emulated "
        "time per seed, totals in emulated hours, device-hours and GPU-hours, the cheapest scale deciding each "
        "headline claim. CONFIG: resolve the run config as a run would, without reading data or training.",
    )
    pln.add_argument("target", metavar="PAPER|CONFIG", help="paper id (distrepro list) or run config YAML")
    pln.add_argument(
        "--scale",
        choices=["proxy", "mid", "gpu", "paper"],
        help="with a paper id: the scale to plan (default proxy); a config file is planned as it is",
    )
    pln.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field (every arm's)")
    pln.add_argument("--json", action="store_true", help="machine-readable JSON")
    pln.set_defaults(func=_cmd_plan)
