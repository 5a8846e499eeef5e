"""Deadline pacing keeps an account of how far behind schedule each rank fell, and says when it did not hold."""

from __future__ import annotations

import pytest

from distrepro.engine.multiprocess import pacing
from distrepro.engine.multiprocess.pacing import HELD_SHARE, Pacer, behind_message, pacing_held
from distrepro.engine.multiprocess.worker import throttle_tags


class FakeClock:
    """perf_counter and sleep on a clock the test moves: a host stall is a jump of ``now``."""

    def __init__(self) -> None:
        self.now = 100.0

    def perf_counter(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(pacing.time, "perf_counter", fake.perf_counter)
    monkeypatch.setattr(pacing.time, "sleep", fake.sleep)
    return fake


def _paced_run(clock: FakeClock, stall_at: int | None, stall_s: float) -> dict[str, float]:
    """Ten virtual seconds at D = 0.1, each step's compute 40 % of its paced second; one stall if asked."""
    pacer = Pacer(dilation=0.1)
    pacer.start()
    for k in range(1, 11):
        clock.now += 0.04 + (stall_s if k == stall_at else 0.0)
        pacer(float(k))
    return pacer.summary()


@pytest.mark.smoke
def test_a_pacer_on_schedule_is_never_late_and_holds(clock: FakeClock) -> None:
    summary = _paced_run(clock, None, 0.0)
    assert summary["points"] == 10 and summary["late_events"] == 0 and summary["max_late_s"] == 0.0
    assert summary["wall_s"] == pytest.approx(1.0)  # the fake clock's seconds, not the machine's: D x virtual time
    assert pacing_held([summary, summary]) and behind_message([summary]) is None


@pytest.mark.smoke
def test_a_stalled_rank_is_reported_by_rank_and_by_how_far(clock: FakeClock) -> None:
    held = _paced_run(clock, None, 0.0)
    stalled = _paced_run(clock, stall_at=5, stall_s=0.5)  # 0.5 s away at step 5: 0.44 s behind (slack 0.06 s)
    assert stalled["max_late_s"] == pytest.approx(0.44)
    assert stalled["late_events"] == 6  # catches up 0.06 s a step: still late at steps 6 to 10 (0.38 ... 0.14 s)
    assert stalled["late_share"] == pytest.approx(stalled["max_late_s"] / stalled["wall_s"])  # fake-clock seconds
    assert not pacing_held([held, stalled])
    message = behind_message([held, stalled])
    assert message is not None and "rank 1" in message and "0.44 s behind" in message


@pytest.mark.smoke
def test_a_small_lateness_holds(clock: FakeClock) -> None:
    """A host that is a little late at every point (1 ms on a 1 s run) still paces: under HELD_SHARE."""
    summary = _paced_run(clock, stall_at=3, stall_s=0.061)
    assert 0 < summary["late_share"] < HELD_SHARE and pacing_held([summary])


@pytest.mark.smoke
def test_the_run_tags_name_the_worst_rank_and_warn_only_when_pacing_did_not_hold(clock: FakeClock) -> None:
    held = _paced_run(clock, None, 0.0)
    stalled = _paced_run(clock, stall_at=2, stall_s=0.3)
    quiet = throttle_tags(0.1, {"compute_ratio": 0.05}, [held, held])
    assert quiet["distrepro.throttle.held"] == "true" and "distrepro.throttle.warning" not in quiet
    loud = throttle_tags(0.1, {}, [held, stalled])
    assert loud["distrepro.throttle.held"] == "false"
    assert float(loud["distrepro.throttle.max_late_s"]) == pytest.approx(stalled["max_late_s"], rel=1e-3)
    assert "rank 1" in loud["distrepro.throttle.warning"]
    assert "distrepro.throttle.max_late_s" not in throttle_tags(0.1, {}, None)  # pacing not gathered: no figure
