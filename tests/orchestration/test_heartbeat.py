"""A long step says what it is: the heartbeat at least every 30 s, and the step it names with a count and an
estimate of the rest (:mod:`distrepro.orchestration.heartbeat`)."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator

import pytest

from distrepro.orchestration.heartbeat import HEARTBEAT_S, Steps, about, heartbeat, watched


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


class FakeClock:
    """Seconds that move only when the test says so: estimates without timing anything."""

    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_an_empty_status_prints_nothing() -> None:
    out = io.StringIO()
    said: list[str] = []

    def status() -> str:
        said.append("asked")
        return ""

    with heartbeat(status, enabled=True, every_s=0.01, stream=out):
        while len(said) < 3:  # the thread asked three times; the test waits, it does not time
            time.sleep(0.01)
    assert out.getvalue() == ""


def test_steps_name_the_step_its_count_and_once_a_unit_is_done_the_rest() -> None:
    clock = FakeClock()
    steps = Steps("report for x", ("reading", "drawing the figures"), clock=clock)
    assert steps.status() == ""
    steps.enter("drawing the figures", total=10, unit="figure")
    assert steps.describe() == "step 2 of 2, drawing the figures: 0 of 10 figures done (0m00s in this step)"
    clock.t += 8
    steps.advance(2)  # 4 s a figure, 8 left
    assert steps.status() == (
        "report for x: step 2 of 2, drawing the figures: 2 of 10 figures done, about 30 s left (0m08s in this step)"
    )
    steps.count("re-timing the runs at 32 settings", 32, unit="setting")  # a counted part: its own pace
    clock.t += 100
    steps.advance(4)
    assert steps.describe() == (
        "step 2 of 2, drawing the figures, re-timing the runs at 32 settings: 4 of 32 settings done, about 12 min "
        "left (1m48s in this step)"
    )
    steps.advance(28)
    assert "32 of 32 settings done (" in steps.describe()  # nothing left: no estimate
    steps.enter("a step of the caller's", "of 3 things")
    assert steps.describe() == "a step of the caller's of 3 things (0m00s in this step)"  # not numbered, no count
    steps.finish()
    assert steps.status() == ""


def test_announced_steps_print_a_line_as_they_start() -> None:
    clock, out = FakeClock(), io.StringIO()
    steps = Steps("report for x", ("judging",), announce=True, stream=out, clock=clock)
    steps.enter("judging", "24 claims")
    clock.t += 65
    steps.count("at proxy, mid", 30, unit="claim")
    steps.advance()  # progress is the heartbeat's, not a line
    assert out.getvalue().splitlines() == [
        "[report for x 0:00:00] step 1 of 1, judging 24 claims",
        "[report for x 0:01:05] step 1 of 1, judging 24 claims, at proxy, mid",
    ]


def test_a_watched_slow_step_is_named_by_the_heartbeat(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake slow step: it waits until the heartbeat (its interval shortened) has named it, with its count."""
    import distrepro.orchestration.heartbeat as hb

    monkeypatch.setattr(hb, "HEARTBEAT_S", 0.01)
    out = io.StringIO()
    with watched(Steps("results", stream=out)) as steps:
        steps.enter("reading each paper's reports", total=5, unit="paper")
        assert _wait_for(out, "results: reading each paper's reports: 0 of 5 papers done")
    assert steps.status() == ""  # finished with the block


def _wait_for(out: io.StringIO, text: str, limit_s: float = 60.0) -> bool:
    """Whether ``text`` appears in ``out`` (a guard against a hang, not a timing assertion)."""
    end = time.monotonic() + limit_s
    while text not in out.getvalue() and time.monotonic() < end:
        time.sleep(0.01)
    return text in out.getvalue()


@pytest.mark.parametrize(
    ("seconds", "said"),
    [(3, "about 5 s"), (42, "about 40 s"), (95, "about 2 min"), (600, "about 10 min"), (7769, "about 2 h 09 min")],
)
def test_about_rounds_as_an_estimate(seconds: float, said: str) -> None:
    assert about(seconds) == said


def test_a_watch_right_after_another_continues_its_silence(monkeypatch: pytest.MonkeyPatch) -> None:
    """The start-up's watch, then the report's: the second's first line is due a heartbeat after the last line
    this module printed, not a heartbeat after its own start (no timing: the moment handed to the heartbeat)."""
    import contextlib

    import distrepro.orchestration.heartbeat as hb

    handed: list[float | None] = []

    @contextlib.contextmanager
    def recording(*args: object, since: float | None = None, **kwargs: object) -> Iterator[None]:
        handed.append(since)
        yield

    monkeypatch.setattr(hb, "heartbeat", lambda status, enabled, every_s, stream, since: recording(since=since))
    monkeypatch.setattr(hb, "HEARTBEAT_S", 3600.0)
    recent = time.monotonic() - 5.0  # a line 5 s ago: within one interval
    monkeypatch.setattr(hb, "_last_line", recent)
    with watched(Steps("x")):
        pass
    long_ago = time.monotonic() - 7200.0  # two intervals of silence already: this watch starts its own
    monkeypatch.setattr(hb, "_last_line", long_ago)
    with watched(Steps("x")):
        pass
    assert handed[0] == recent and handed[1] is not None and handed[1] > long_ago + 3600.0


class WriteCalls(io.StringIO):
    """A stream that keeps each ``write`` call's text apart: what another thread could slip a line between."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def write(self, text: str) -> int:
        self.calls.append(text)
        return super().write(text)


def test_each_line_is_one_write_so_another_threads_line_cannot_land_inside_it() -> None:
    """``print`` writes a line's text and its newline in two calls; the command's own line written between them
    (an error, a step announced while the heartbeat's thread prints) would sit inside a heartbeat line."""
    beats, steps_out = WriteCalls(), WriteCalls()
    with heartbeat(lambda: "arm/s0", enabled=True, every_s=0.01, stream=beats):
        time.sleep(0.1)
    Steps("report for x", ("judging",), announce=True, stream=steps_out, clock=FakeClock()).enter("judging")
    assert beats.calls and all(c.startswith("[alive ") and c.endswith("\n") for c in beats.calls), beats.calls
    assert steps_out.calls == ["[report for x 0:00:00] step 1 of 1, judging\n"]
