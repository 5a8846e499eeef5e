"""``distrepro ui``: serve the MLflow UI over the store and print the address of each paper's runs table."""

from __future__ import annotations

import argparse
import sys


def _store(given: str | None) -> str:
    """The store to serve: ``--store``, else the one every other command uses; a SQLite file that does not exist is
    refused (MLflow would serve a new, empty one)."""
    from distrepro.errors import DistreproError
    from distrepro.tracking.mlflow_client import resolve_tracking_uri
    from distrepro.tracking.storeprobe import sqlite_path

    uri = given or resolve_tracking_uri()
    path = sqlite_path(uri)
    if path is not None and not path.is_file():
        flag = "--store" if given else "the store (MLFLOW_TRACKING_URI, else ./mlflow.db)"
        raise DistreproError(
            f"{flag} {uri}: no such file; 'distrepro reproduce <paper>' or 'distrepro run <config>' creates it, or "
            "name another with --store URI"
        )
    return uri


def _print_addresses(uri: str, base: str) -> None:
    from distrepro.tracking.mlflow_client import make_client
    from distrepro.tracking.ui_server import addresses

    found = addresses(make_client(uri), base)
    if not found:
        print(f"  no distrepro experiment in this store yet: {base} lists what it holds")
    for a in found:
        print(f"  {a.experiment}: {a.confirmatory}")
        if a.exploratory:
            print(f"  {a.experiment}, exploratory runs: {a.exploratory}")
    print(
        "  (at the first visit MLflow opens its Assistant panel, a quarter of the window: close it once to see the "
        "runs table's columns)"
    )


def _cmd_ui(args: argparse.Namespace) -> int:
    from distrepro.tracking.ui_server import base_url, check_port, start_server, stop_server, wait_until_up

    uri = _store(args.store)
    if uri.startswith(("http://", "https://")):  # a tracking server serves its UI already
        print(f"the store is an MLflow server: its UI is {uri}")
        _print_addresses(uri, uri.rstrip("/"))
        return 0
    base = base_url(args.host, args.port)
    check_port(args.host, args.port)
    print(f"distrepro: starting the MLflow UI on {base} (store {uri})", file=sys.stderr, flush=True)
    proc, log = start_server(uri, args.host, args.port)
    try:
        wait_until_up(proc, base, log)
        print(f"MLflow UI: {base} (store {uri}); Ctrl-C stops it", flush=True)
        _print_addresses(uri, base)
        sys.stdout.flush()
        proc.wait()
    except KeyboardInterrupt:  # Ctrl-C (or SIGTERM, through main's handler) is how a served UI ends
        stop_server(proc)
        print("MLflow UI stopped", flush=True)
        return 0
    finally:
        stop_server(proc)
    from distrepro.errors import DistreproError

    raise DistreproError(f"the MLflow UI stopped by itself (exit {proc.returncode}); its log: {log}")


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (1 to 65535)")
    return port


def add_parser(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    """The ``ui`` subcommand."""
    ui = sub.add_parser(
        "ui",
        parents=parents,
        help="serve the MLflow UI over the store and print the address of each paper's runs table (Ctrl-C stops it)",
        description="Start MLflow's UI server on the tracking store (the one every other command uses: "
        "MLFLOW_TRACKING_URI, else ./mlflow.db), bring distrepro's shared runs-table views of every experiment up "
        "to date, and print the address that opens each: one row per arm with its emulated time and accuracy "
        "(mean and 95 % interval over seeds) and its headline verdicts, seeds under their arm, the confirmatory "
        "runs apart from the exploratory ones. Runs until Ctrl-C. The server's log goes to a temporary file.",
    )
    ui.add_argument("--port", type=_port, default=5000, help="the port to serve on (default: 5000)")
    ui.add_argument(
        "--host",
        default="127.0.0.1",
        help="the address to listen on (default: 127.0.0.1, this machine only; 0.0.0.0 for every interface)",
    )
    ui.add_argument(
        "--store", metavar="URI", help="the MLflow tracking store (default: MLFLOW_TRACKING_URI or ./mlflow.db)"
    )
    ui.set_defaults(func=_cmd_ui)
