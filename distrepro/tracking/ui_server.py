"""The MLflow UI served over a store (``distrepro ui``), and the addresses of distrepro's views in it.

Why not ``mlflow ui`` alone: it serves the store, but says nothing of which address opens distrepro's runs table
(an experiment id, a view key, the "Model training" pages: :mod:`distrepro.tracking.ui_view`), prints a line per
request, and a store made by an older distrepro has older views. Here the server is MLflow's own, one worker,
started from this Python (so it is the MLflow the runs were logged with), its log in a file; the views of every
distrepro experiment are brought up to date, and the address of each is printed.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distrepro.errors import DistreproError

#: how long the server may take to answer ``/health`` (it imports MLflow and opens the store: 5 s on an idle
#: machine, over a minute on a loaded one)
START_TIMEOUT_S = 180.0
#: a line every this many seconds while it starts, so the wait is never silent
SAY_EVERY_S = 20.0


@dataclass(frozen=True)
class Address:
    """One distrepro experiment's runs table: its confirmatory view, and its exploratory one where it has such runs."""

    experiment: str
    confirmatory: str
    exploratory: str | None


def base_url(host: str, port: int) -> str:
    """The address a browser on this machine opens: ``0.0.0.0`` and ``::`` (every interface) are reached locally."""
    local = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    return f"http://[{local}]:{port}" if ":" in local else f"http://{local}:{port}"


def check_port(host: str, port: int) -> None:
    """Refuse a port something else listens on, in one line, before MLflow fails on it after its imports."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise DistreproError(
                f"--port {port}: cannot listen on {host}:{port} ({exc.strerror or exc}; another MLflow UI?); "
                "choose another with --port N"
            ) from None


#: the leader of the server's session: it starts ``mlflow server`` (argv[2:]) and, when ``distrepro ui`` (pid
#: argv[1]) dies, however it dies (``kill -9`` included: ``PR_SET_PDEATHSIG`` on Linux), ends the whole session,
#: uvicorn's worker with it; without it a killed ``distrepro ui`` left the server holding its port
_GUARDIAN = """\
import ctypes, os, signal, subprocess, sys
def end(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.killpg(0, signal.SIGTERM)
signal.signal(signal.SIGTERM, end)
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
try:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
except (OSError, AttributeError):
    pass
if os.getppid() != int(sys.argv[1]):
    sys.exit(1)
sys.exit(subprocess.call(sys.argv[2:]))
"""


def start_server(uri: str, host: str, port: int) -> tuple[subprocess.Popen[bytes], Path]:
    """``mlflow server`` on ``uri`` at ``host:port``, one worker, in a session of its own (stopped by
    :func:`stop_server`, not by the terminal's Ctrl-C) led by a guardian that ends it when this process dies (a
    ``kill -9`` too), its output in a log file; returns the guardian and the log's path."""
    fd, log_name = tempfile.mkstemp(prefix="distrepro-ui-", suffix=".log")
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "MLFLOW_DISABLE_TELEMETRY": "true"}
    command = [sys.executable, "-m", "mlflow", "server", "--host", host, "--port", str(port), "--workers", "1"]
    guardian = [sys.executable, "-c", _GUARDIAN, str(os.getpid())]
    with os.fdopen(fd, "wb") as log:
        proc = subprocess.Popen(
            [*guardian, *command, "--backend-store-uri", uri],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    return proc, Path(log_name)


def _tail(log: Path, lines: int = 5) -> str:
    try:
        text = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text[-lines:])


def wait_until_up(proc: subprocess.Popen[bytes], base: str, log: Path, timeout: float = START_TIMEOUT_S) -> None:
    """Poll ``/health`` until the server answers; a server that exits or stays silent is one line with its log's
    last lines."""
    start = time.monotonic()
    said = start
    while True:
        if proc.poll() is not None:
            raise DistreproError(f"the MLflow UI did not start (exit {proc.returncode}): {_tail(log)} (log: {log})")
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        now = time.monotonic()
        if now - start > timeout:
            stop_server(proc)
            raise DistreproError(f"the MLflow UI did not answer within {timeout:.0f} s: {_tail(log)} (log: {log})")
        if now - said >= SAY_EVERY_S:
            print(f"distrepro: the MLflow UI is still starting ({now - start:.0f} s)", file=sys.stderr, flush=True)
            said = now
        time.sleep(0.5)


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's session (its workers too), SIGKILL after 20 s."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def tag_exploratory_arms(client: Any, experiment_id: str) -> int:
    """Tag the arms and seeds of every exploratory reproduction as exploratory where an older distrepro tagged only
    its umbrella run (they would show among the confirmatory runs); returns how many runs were tagged."""
    from distrepro.tracking.mlflow_client import REPRODUCTION_TAG
    from distrepro.tracking.ui_view import EXPLORATORY_FILTER, EXPLORATORY_TAG

    untagged = f"tags.`{EXPLORATORY_TAG}` IS NULL"
    umbrellas = f"{EXPLORATORY_FILTER} and tags.`distrepro.reproduce` IS NOT NULL"  # the scale a reproduction ran at
    tagged = 0
    for umbrella in client.search_runs([experiment_id], filter_string=umbrellas, max_results=10_000):
        arms = f"tags.`{REPRODUCTION_TAG}` = '{umbrella.info.run_id}'"
        for arm in client.search_runs([experiment_id], filter_string=arms, max_results=10_000):
            seeds = f"tags.`mlflow.parentRunId` = '{arm.info.run_id}' and {untagged}"
            runs = [arm] if EXPLORATORY_TAG not in arm.data.tags else []
            for run in [*runs, *client.search_runs([experiment_id], filter_string=seeds, max_results=10_000)]:
                client.set_tag(run.info.run_id, EXPLORATORY_TAG, "true")
                tagged += 1
    return tagged


def addresses(client: Any, base: str) -> list[Address]:
    """Every distrepro experiment of the store (``distrepro/<paper>``), by name, with the addresses of its views,
    each view first brought up to date (:func:`~distrepro.tracking.ui_view.ensure_views`: a store written by an
    older distrepro keeps older views otherwise), and its exploratory runs tagged (:func:`tag_exploratory_arms`)."""
    from distrepro.tracking.ui_view import EXPLORATORY_FILTER, ensure_views, ui_url

    out = []
    for exp in sorted(client.search_experiments(), key=lambda e: e.name):
        if not exp.name.startswith("distrepro/"):
            continue
        ensure_views(client, exp.experiment_id, exp.tags)
        tag_exploratory_arms(client, exp.experiment_id)
        explored = client.search_runs([exp.experiment_id], filter_string=EXPLORATORY_FILTER, max_results=1)
        exploratory = ui_url(exp.experiment_id, base, exploratory=True) if explored else None
        out.append(Address(exp.name, ui_url(exp.experiment_id, base), exploratory))
    return out
