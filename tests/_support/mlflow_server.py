"""A real ``mlflow server`` for the UI tests, and the headless browser they open it in.

Why here: the tests that look at what an MLflow user sees (the runs table, the chart and compare views) each start
a server on a store, wait for its ``/health`` and stop its whole process group; written once, a change in how
MLflow starts (a flag, a slower start on a loaded machine) is made in one place.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from clirun import free_port
from hang_guard import hang_guard

#: a headless Chromium, or None (the UI tests skip; CI installs it)
CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
#: seconds a server gets to answer ``/health`` (stretched on a loaded machine by :func:`hang_guard`)
READY_S = 90


@contextmanager
def mlflow_server(tracking_uri: str, cwd: Path) -> Iterator[str]:
    """``mlflow server`` on ``tracking_uri`` at a free local port, one worker, no job execution, no telemetry; yields
    its base URL once ``/health`` answers, and ends its process group when the block ends."""
    port = free_port()
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "MLFLOW_DISABLE_TELEMETRY": "true"}
    server = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
         "--backend-store-uri", tracking_uri],
        env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + hang_guard(READY_S)
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail(f"mlflow server did not become healthy within {READY_S} s")
        yield base
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
