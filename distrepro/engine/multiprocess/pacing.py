"""Throttling by time dilation: make wall-clock time follow the virtual clock, slowed down.

To emulate slower devices and links on a faster host for real, every worker paces itself so
that its wall-clock time stands to the profile's times in one common ratio, the dilation factor
D: after each compute step or communication the worker sleeps until ``t0 + D · virtual_time``
(deadline pacing). We measured both on a 2-vCPU VM with four concurrent single-thread workers
training a small CNN at target speeds 1, 0.5, 0.25 and 0.1: a plain duty-cycle sleep after each
step reached 0.387, 0.141 and 0.057 of the full-speed worker's rate (20–40% short, under
contention), while deadline pacing gave 0.500, 0.250 and 0.100 ("Throttling fidelity" in
BENCHMARKS.md checks the engine's throttled time against the virtual clock). D is chosen so that
no worker must run faster than it can: the largest ratio of real to modelled time measured in a
short calibration, times a margin. Reported ("throttled") times are wall time divided by D.

Pacing can only slow a worker down. When the host stalls one (another job takes the cores, the
process is descheduled for a second), that worker falls behind its schedule and the wall-clock
speeds it measures in the meantime are the host's, not the profile's: a self-adaptive method then
re-splits towards the stall. Every worker therefore keeps how far behind it fell
(:meth:`Pacer.summary`), the ranks gather it at the end, and :func:`pacing_held` says whether
any rank fell behind by more than :data:`HELD_SHARE` of the paced run.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

#: Pacing held when no rank was ever further behind schedule than this share of its paced wall time.
#: An interval's measured speed is off by at most the lateness over the interval's length, so a
#: method re-measuring ~10 times a run (Chao et al.'s re-split every epoch) sees at most ~20 % there.
HELD_SHARE = 0.02


class Pacer:
    """Deadline pacing of one worker against its virtual clock."""

    def __init__(self, dilation: float) -> None:
        if dilation <= 0:
            raise ValueError(f"dilation must be positive, got {dilation}")
        self.dilation = dilation
        self.t0: float | None = None
        self.max_late_s = 0.0  # the furthest behind schedule a pacing point was (a sign D is too small)
        self.late_events = 0
        self.points = 0

    def start(self) -> None:
        """Start the wall clock (call on every rank right after a barrier)."""
        self.t0 = time.perf_counter()

    def __call__(self, virtual_t: float) -> None:
        if self.t0 is None:
            return
        target = self.t0 + self.dilation * virtual_t
        now = time.perf_counter()
        self.points += 1
        if target > now:
            time.sleep(target - now)
        else:
            self.max_late_s = max(self.max_late_s, now - target)
            self.late_events += 1

    def shift(self, seconds: float) -> None:
        """Leave ``seconds`` of wall time out of the schedule (untimed work such as evaluation)."""
        if self.t0 is not None:
            self.t0 += seconds

    def wall_s(self) -> float:
        return 0.0 if self.t0 is None else time.perf_counter() - self.t0

    def throttled_s(self) -> float:
        """Wall time since start in emulated seconds (wall / D)."""
        return self.wall_s() / self.dilation

    def summary(self) -> dict[str, float]:
        """How well this worker kept its schedule: gathered from every rank at the end of a run."""
        wall = self.wall_s()
        return {
            "max_late_s": self.max_late_s,
            "late_events": self.late_events,
            "points": self.points,
            "wall_s": wall,
            "late_share": self.max_late_s / wall if wall > 0 else 0.0,
        }


def pacing_held(per_rank: Sequence[dict[str, float]], share: float = HELD_SHARE) -> bool:
    """True when no rank fell behind its schedule by more than ``share`` of its paced wall time.

    >>> pacing_held([{"late_share": 0.001}, {"late_share": 0.15}])
    False
    """
    return all(r["late_share"] <= share for r in per_rank)


def behind_message(per_rank: Sequence[dict[str, float]], share: float = HELD_SHARE) -> str | None:
    """One line for the user when pacing did not hold (None when it did): which rank, how far behind."""
    if pacing_held(per_rank, share):
        return None
    rank = max(range(len(per_rank)), key=lambda r: per_rank[r]["late_share"])
    worst = per_rank[rank]
    return (
        f"throttling did not hold on rank {rank}: it fell {worst['max_late_s']:.2f} s behind its schedule "
        f"({worst['late_share']:.0%} of its {worst['wall_s']:.1f} s paced run; limit {share:.0%}): the wall-clock "
        "speeds it measured meanwhile were the host's, not the profile's (a stalled or busy host, or too small "
        "a throttle.margin)"
    )


def choose_dilation(real_over_virtual: list[float], margin: float) -> float:
    """The common dilation factor: the slowest worker's real/virtual ratio times ``margin``.

    >>> choose_dilation([2.0, 10.0, 4.0], 1.5)
    15.0
    """
    ratios = [r for r in real_over_virtual if r > 0]
    if not ratios:
        raise ValueError("no calibration measurement")
    return max(ratios) * margin
