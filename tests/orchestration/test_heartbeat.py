"""Under ``--no-progress`` a long run still says it is alive, at least every 30 s."""

from __future__ import annotations

import io
import time

from distrepro.orchestration.progress import HEARTBEAT_S, heartbeat


def test_a_heartbeat_line_comes_while_the_block_runs_and_stops_after() -> None:
    out = io.StringIO()
    with heartbeat(lambda: "arm/s0: 40% of the budget", enabled=True, every_s=0.05, stream=out):
        time.sleep(0.3)
    lines = out.getvalue().splitlines()
    assert len(lines) >= 3 and all(ln.startswith("[alive 0m00s] arm/s0: 40%") for ln in lines)
    time.sleep(0.15)
    assert out.getvalue().splitlines() == lines  # the thread is gone with the block
    assert HEARTBEAT_S <= 30


def test_no_heartbeat_beside_a_live_bar() -> None:
    out = io.StringIO()
    with heartbeat(lambda: "x", enabled=False, every_s=0.01, stream=out):
        time.sleep(0.05)
    assert out.getvalue() == ""
