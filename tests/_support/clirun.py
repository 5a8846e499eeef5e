"""``distrepro`` as a user runs it: a process with its own tracking URI, its CPU time measured.

The tracking-store tests judge what a user sees (exit status, how many lines on stderr, how much work it
did), so they run the real command line, not ``main()`` in the test process: each command a process of its own,
forked from one that imported the command line once (:mod:`cli_zygote` says why that is the user's process, and
when it falls back to ``python -m distrepro.cli``). Wall time is kept for messages
only: on a shared machine it measures the neighbours, so no test asserts it; a command that hangs is ended
by the ``timeout`` (generous: many times a normal run) and then fails on its exit status.
"""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cli_zygote
import yaml
from hang_guard import hang_guard

TINY: dict[str, Any] = {
    "name": "store-tiny",
    "method": "ar_sgd",
    "dataset": {"name": "synthetic", "params": {"train_size": 256, "test_size": 64, "image_size": 8}},
    "model": {"name": "small_cnn", "params": {"hidden": 16}},
    "batch_size": 8,
    "budget": {"steps": 3},
    "eval": {"times": 2},
    "torch_threads": 1,
}


@dataclass
class Done:
    rc: int
    out: str
    err: str
    elapsed_s: float
    #: user + system CPU seconds of the command (and of any children it waited for)
    cpu_s: float = 0.0

    @property
    def err_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.err_lines if line.startswith("distrepro: error:")]


def python_prints(program: str, *args: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    """What ``python -c PROGRAM ARGS`` prints on stdout in a fresh interpreter (a test of what a process does at its
    start: its environment, its collector); a non-zero exit fails the test with the program's stderr."""
    import sys

    done = subprocess.run(
        [sys.executable, "-c", program, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=hang_guard(120),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def free_port() -> int:
    """A port nothing listens on now (bound once to port 0, then released): never a fixed one."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_config(folder: Path, **changes: Any) -> Path:
    path = folder / f"{changes.get('name', TINY['name'])}.yaml"
    path.write_text(yaml.safe_dump({**TINY, **changes}), encoding="utf-8")
    return path


def cli_env(uri: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env.update({"MLFLOW_TRACKING_URI": uri, "MLFLOW_DISABLE_TELEMETRY": "true", "PYTHONUNBUFFERED": "1"})
    return env


def start_cli(args: list[str], uri: str, cwd: Path) -> cli_zygote.Forked | subprocess.Popen[str]:
    return cli_zygote.popen(args, cwd, cli_env(uri), stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def finish(proc: cli_zygote.Forked | subprocess.Popen[str], started: float, timeout: float = 240) -> Done:
    """Wait for ``proc`` (killed after ``timeout`` s: a hang guard, not a bound on how long it should take).
    Its CPU time is the zygote's measure of it, or for a subprocess what this process's reaped children gained
    meanwhile (another child reaped in the same window would add to it: tests bound it generously, from above)."""
    cpu0 = _children_cpu_s()
    try:
        out, err = proc.communicate(timeout=hang_guard(timeout))
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    assert proc.returncode is not None and out is not None and err is not None
    cpu = cli_zygote.cpu_of(proc, _children_cpu_s() - cpu0)
    return Done(proc.returncode, out, err, time.monotonic() - started, cpu)


def run_cli(args: list[str], uri: str, cwd: Path, timeout: float = 240) -> Done:
    started = time.monotonic()
    return finish(start_cli(args, uri, cwd), started, timeout)


def without_heartbeats(err: str) -> str:
    """stderr less the ``[alive …]`` lines a slow start (torch and MLflow loading on a loaded machine) may print
    before the error: a heartbeat names a step, it is not a second error line."""
    return "".join(line for line in err.splitlines(keepends=True) if not line.startswith("[alive "))
