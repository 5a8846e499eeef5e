"""Reading a campaign's cells back from MLflow, for the executor tests: metric histories, and a live cell's pid.

Executors must not change what a cell computes, so the tests compare every logged point of every child run,
bit for bit, except the wall-clock series (which measure the machine, not the training).
"""

from __future__ import annotations

import os
import signal
import struct
import time
from pathlib import Path
from typing import Any

from hang_guard import hang_guard

from distrepro import metrics as M
from distrepro.orchestration.executors.cell_task import WORKER_TAG
from distrepro.tracking.mlflow_client import make_client

#: series that measure the machine's wall clock, not the training: they differ between any two runs
WALL_CLOCK = {M.WALL_S, M.FINAL_WALL_S, M.THROTTLED_S}


def _bits(value: float) -> bytes:
    return struct.pack("<d", value)  # NaN == NaN, and -0.0 != 0.0: bitwise, as the claim says


def children(uri: str, parent: str) -> dict[int, Any]:
    """seed → the newest child run of campaign ``parent``."""
    client = make_client(uri)
    exp = client.get_run(parent).info.experiment_id
    runs = client.search_runs([exp], filter_string=f"tags.`mlflow.parentRunId` = '{parent}'", max_results=1000)
    out: dict[int, Any] = {}
    for run in sorted(runs, key=lambda r: r.info.start_time):
        out[int(run.data.tags["distrepro.seed"])] = run
    return out


def histories(uri: str, run: Any) -> dict[str, list[tuple[int, bytes]]]:
    """Every metric series of ``run`` but the wall-clock ones, as (step, value bits) in step order."""
    client = make_client(uri)
    out = {}
    for key in sorted(run.data.metrics):
        if key in WALL_CLOCK or key.startswith("emu/" + M.WALL_S):
            continue
        points = client.get_metric_history(run.info.run_id, key)
        out[key] = sorted((p.step, _bits(p.value)) for p in points)
    return out


def campaign_metrics(uri: str, parent: str) -> dict[int, dict[str, list[tuple[int, bytes]]]]:
    return {seed: histories(uri, run) for seed, run in children(uri, parent).items()}


def kill_running_cell(uri: str, experiment: str, timeout_s: float = 180.0, after_s: float = 1.0) -> tuple[str, int]:
    """Wait until a cell of ``experiment`` is RUNNING in a worker, give it ``after_s``, then SIGKILL that worker
    (its pid from the run's ``distrepro.worker`` tag); returns (run id, pid)."""
    client = make_client(uri)
    deadline = time.monotonic() + hang_guard(timeout_s)
    while time.monotonic() < deadline:
        exp = client.get_experiment_by_name(experiment)
        if exp is not None:
            for run in client.search_runs([exp.experiment_id], filter_string="attributes.status = 'RUNNING'"):
                where = run.data.tags.get(WORKER_TAG)
                if where and "distrepro.campaign" in run.data.tags and "mlflow.parentRunId" in run.data.tags:
                    pid = int(where.split(":")[1].split()[0])
                    time.sleep(after_s)
                    os.kill(pid, signal.SIGKILL)
                    return run.info.run_id, pid
        time.sleep(0.2)
    raise AssertionError(f"no cell of {experiment} started running within {timeout_s:.0f} s")


def session_processes(sid: int, grace_s: float = 60.0) -> list[str]:
    """Live processes (not zombies) of session ``sid`` after at most ``grace_s``: what a command started with
    ``start_new_session`` left behind (multiprocessing's resource tracker leaves a moment after its parent)."""
    deadline = time.monotonic() + hang_guard(grace_s)
    while (left := _in_session(sid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def _in_session(sid: int) -> list[str]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) ": state, ppid, pgrp, session, ...
        if int(fields[3]) == sid and fields[0] != "Z":
            cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            out.append(f"{text[: text.rindex(')') + 1]} {cmdline[:200]}")
    return out


def run_on(executor: Any, cfg: Any, resume: str | None = None) -> Any:
    """Run the campaign of ``cfg`` on ``executor``, as ``distrepro run --executor ...`` does."""
    from distrepro.orchestration.executors.dispatch import CampaignRequest, run_campaigns

    return run_campaigns([CampaignRequest(cfg, None, resume)], executor, show_progress=False)[0]


def wait_for_line(proc: Any, needle: str, timeout_s: float = 300.0) -> list[str]:
    """Read ``proc``'s stderr (a text pipe) line by line until one contains ``needle``; the lines read.

    A campaign's own progress lines say when a cell starts, at once: polling the tracking store instead
    races its writers on a loaded machine (SQLite readers wait for them)."""
    import threading

    lines: list[str] = []
    found = threading.Event()

    def read() -> None:
        for line in proc.stderr:
            lines.append(line)
            if needle in line:
                found.set()
                return

    threading.Thread(target=read, daemon=True).start()
    if not found.wait(hang_guard(timeout_s)):
        raise AssertionError(f"no line with {needle!r} within {timeout_s:.0f} s: {''.join(lines)[-2000:]}")
    return lines


def sigint_as_at_a_terminal() -> None:
    """``preexec_fn`` for a command that a test interrupts: SIGINT handled as in a terminal's foreground job.

    A shell starts background jobs (``pytest ... &``) with SIGINT ignored, and children inherit that: the
    command would never see the test's Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_interruptible(config: Path, cwd: Path, env: dict[str, str], *args: str) -> Any:
    """``distrepro run CONFIG *args`` as a process a test can Ctrl-C: its own session (so ``os.killpg`` reaches
    the command and every worker it starts), SIGINT as in a terminal, stdout and stderr as text pipes."""
    import subprocess
    import sys

    return subprocess.Popen(
        [sys.executable, "-m", "distrepro.cli", "run", str(config), *args, "--no-progress"],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=sigint_as_at_a_terminal,
    )
