"""``distrepro test METHOD``: the generated tests of a method plugin, from a checkout or an installed wheel."""

from __future__ import annotations

import argparse


def _cmd_test(args: argparse.Namespace) -> int:
    from distrepro.conformance.runner import run_tests

    return run_tests(args.methods, args.pytest_args or [])


def add_parser(sub: argparse._SubParsersAction, common: list[argparse.ArgumentParser]) -> None:
    """The ``test`` subcommand."""
    tst = sub.add_parser(
        "test",
        parents=common,
        help="run the generated tests of a method (a tiny campaign; the checkpoint round trip)",
        description="Run the tests every method plugin gets (needs pytest: pip install 'distrepro[test]'): a tiny "
        "campaign that must learn and be logged, and, for a lockstep method, the checkpoint round trip.",
    )
    tst.add_argument("methods", nargs="+", metavar="METHOD", help="method name(s), found in the roots")
    tst.add_argument(
        "--pytest-args", action="append", metavar="ARG", help="passed to pytest as it is (e.g. --pytest-args=-x)"
    )
    tst.set_defaults(func=_cmd_test)
