"""``distrepro preregister PAPER --scale S``: freeze a paper's claims, seeds and analysis before the confirmatory
runs (:mod:`distrepro.claims.preregistration`)."""

from __future__ import annotations

import argparse


def _cmd_preregister(args: argparse.Namespace) -> int:
    from distrepro.claims.preregistration import preregister
    from distrepro.config.run_config import parse_seeds

    path, record = preregister(
        args.paper,
        args.scale,
        parse_seeds(args.seeds) if args.seeds else None,
        [int(x) for x in args.looks.split(",")] if args.looks else None,
        replace=args.replace,
    )
    seeds = record["seeds"]
    print(f"registered {len(record['claims'])} claims of {args.paper} at {args.scale} scale: {path}")
    print(
        f"commit it before the runs, then: distrepro reproduce {args.paper} --scale {args.scale} "
        f"--seeds {','.join(map(str, seeds))}"
    )
    return 0


def add_parser(sub: argparse._SubParsersAction, common: list[argparse.ArgumentParser]) -> None:
    """The ``preregister`` subcommand."""
    pre = sub.add_parser(
        "preregister",
        parents=common,
        help="freeze a paper's claims, seeds and analysis at one scale before the confirmatory runs",
        description="Write methods/<paper>/preregistration/<scale>.yaml: the claims file's hash, one hash per "
        "claim judged at SCALE, margins, minimum seeds, regime thresholds, the confirmatory seeds and the "
        "sequential plan. Commit it before the runs; reports of that scale stamp it and mark claims edited "
        "since as post hoc.",
    )
    pre.add_argument("paper", help="paper id (citation.id in a method's paper.yaml)")
    pre.add_argument("--scale", default="mid", choices=["proxy", "mid", "gpu", "paper"], help="default: mid")
    pre.add_argument(
        "--seeds", help="confirmatory seeds, e.g. 100-109 (default: from 100, as many as the arms' configs run)"
    )
    pre.add_argument("--looks", help="a Pocock group-sequential plan: seed counts of each look, e.g. 5,10")
    pre.add_argument("--replace", action="store_true", help="replace an existing record (commit why)")
    pre.set_defaults(func=_cmd_preregister)
