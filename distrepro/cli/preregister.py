"""``distrepro preregister PAPER --scale S``: freeze a paper's claims, seeds and analysis before the confirmatory
runs (:mod:`distrepro.claims.preregistration`)."""

from __future__ import annotations

import argparse
import itertools
from typing import TYPE_CHECKING, Any

from distrepro.cli.common import paper_id

if TYPE_CHECKING:
    from distrepro.claims.pilot import PilotRequest


def _pilot(args: argparse.Namespace) -> PilotRequest | None:
    """The pilot request of ``--pilot`` (implied by ``--pilot-campaign`` / ``--pilot-seeds``), or None."""
    if not (args.pilot or args.pilot_campaign or args.pilot_seeds):
        return None
    from distrepro.claims.pilot import PilotRequest
    from distrepro.config.run_config import parse_seeds

    return PilotRequest(
        campaigns=args.pilot_campaign or None,
        seeds=parse_seeds(args.pilot_seeds, "--pilot-seeds") if args.pilot_seeds else None,
        power=args.power,
        max_seeds=args.max_seeds,
    )


def _print_pilot(block: dict[str, Any], n: int) -> None:
    from distrepro.claims.pilot import claim_line, summary_line

    print(summary_line(block))
    for cid, entry in (block.get("claims") or {}).items():
        print(f"  {claim_line(cid, entry, int(block.get('max_seeds', 0)))}")
    if n != block.get("n"):
        print(f"note: --seeds registers n = {n}, not the n = {block.get('n')} the pilot plans")


def parse_looks(text: str) -> list[int]:
    """``--looks 5,10``: increasing seed counts of at least 2, the flag named in the error (``1,x`` and ``0,2`` ended
    in an unexpected ``ValueError``)."""
    from distrepro.errors import DistreproError

    looks = []
    for part in text.split(","):
        if not part.strip().isdigit():
            raise DistreproError(f"--looks {text}: {part.strip()!r} is not a seed count (e.g. --looks 5,10)")
        looks.append(int(part))
    if looks[0] < 2 or any(b <= a for a, b in itertools.pairwise(looks)):
        raise DistreproError(f"--looks {text}: the looks must be increasing seed counts of at least 2 (e.g. 5,10)")
    return looks


def _cmd_preregister(args: argparse.Namespace) -> int:
    args.paper = paper_id(args.paper)
    from distrepro.claims.preregistration import preregister
    from distrepro.config.run_config import parse_seeds

    path, record = preregister(
        args.paper,
        args.scale,
        parse_seeds(args.seeds) if args.seeds else None,
        parse_looks(args.looks) if args.looks else None,
        replace=args.replace,
        pilot=_pilot(args),
        samples=args.samples,
        post_hoc=args.post_hoc,
    )
    seeds = record["seeds"]
    if "pilot" in record:
        _print_pilot(record["pilot"], len(seeds))
    used = record.get("post_hoc_seeds") or []
    if used:
        print(
            f"note: registered post hoc: runs already used seed(s) {', '.join(str(u['seed']) for u in used)}; "
            "every verdict this record judges is post hoc"
        )
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
    pre.add_argument(
        "--pilot",
        action="store_true",
        help="choose n from a pilot: the paper's runs at SCALE on exploratory seeds (below 100) in the MLflow store, "
        "discarded from confirmation; n = the largest over the headline claims of the seeds each needs for --power",
    )
    pre.add_argument("--pilot-campaign", nargs="+", metavar="ID", help="the pilot's campaign run ids (implies --pilot)")
    pre.add_argument("--pilot-seeds", help="the pilot's seeds, e.g. 0-4, all below 100 (implies --pilot)")
    pre.add_argument("--power", type=float, default=0.8, help="power the pilot plans for (default: 0.8)")
    pre.add_argument(
        "--max-seeds",
        type=int,
        default=30,
        help="cap on n; a claim needing more is listed as not resolvable by seeds at this scale (default: 30)",
    )
    pre.add_argument("--looks", help="a Pocock group-sequential plan: seed counts of each look, e.g. 5,10")
    pre.add_argument(
        "--samples",
        type=int,
        help="hardware samples the sensitivity check of the timing verdicts will draw (report --samples), frozen in "
        "the record (default: the paper's setup.sensitivity.samples, at most 32 for the default check)",
    )
    pre.add_argument(
        "--replace",
        action="store_true",
        help="replace an existing record (commit why); the record keeps a replaced: history and its verdicts are "
        "post hoc",
    )
    pre.add_argument(
        "--post-hoc",
        action="store_true",
        help="register seeds that runs of the paper at SCALE in the MLflow store already used (refused without it): "
        "the record keeps those runs and every verdict it judges is post hoc",
    )
    pre.set_defaults(func=_cmd_preregister)
