"""The contention ledger over lanes holds, lane by lane, bit for bit what the scalar ledger of that lane holds."""

from __future__ import annotations

import numpy as np
import pytest

from distrepro.sensitivity.lane_contention import Diverged, LaneLedger, pymax, slowed_finish
from distrepro.timing.contention import ContentionLedger
from distrepro.timing.framework import slowed_finish_s

pytestmark = pytest.mark.smoke

LANES = 12


def _same(lanes: np.ndarray | float, scalars: list[float]) -> bool:
    """Every lane equals its scalar to the bit."""
    return np.broadcast_to(np.asarray(lanes, dtype=float), (len(scalars),)).tobytes() == np.array(scalars).tobytes()


def test_pymax_is_pythons_max_with_its_nan_and_signed_zero() -> None:
    a = np.array([1.0, 2.0, np.nan, 0.0, -0.0, 3.0])
    b = np.array([2.0, 1.0, 5.0, -0.0, 0.0, np.nan])
    assert _same(pymax(a, b), [max(x, y) for x, y in zip(a.tolist(), b.tolist(), strict=True)])


@pytest.mark.parametrize("seed", range(5))
def test_slowed_finish_per_lane_is_the_scalar_one_over_that_lanes_spans(seed: int) -> None:
    rng = np.random.default_rng(seed)
    spans = 5
    starts = np.sort(rng.uniform(0.0, 1.0, (spans, LANES)), axis=0)
    ends = starts + rng.uniform(0.0, 0.15, (spans, LANES))
    valid = rng.random((spans, LANES)) < 0.7
    begin, work, factor = rng.uniform(0.0, 0.3, LANES), rng.uniform(-0.1, 0.8, LANES), rng.uniform(0.0, 0.5, LANES)
    got = slowed_finish(begin, work, starts, ends, valid, factor)
    want = [
        slowed_finish_s(
            float(begin[i]), float(work[i]),
            [(float(s), float(e)) for s, e, ok in zip(starts[:, i], ends[:, i], valid[:, i], strict=True) if ok],
            float(factor[i]),
        )
        for i in range(LANES)
    ]  # fmt: skip
    assert _same(got, want)


def _scalar_finish(begin, work, starts, ends, factor, valid=None) -> list[float]:
    return [
        slowed_finish_s(
            float(begin[i]), float(work[i]),
            [(float(s), float(e)) for j, (s, e) in enumerate(zip(starts[:, i], ends[:, i], strict=True))
             if valid is None or valid[j, i]],
            float(factor[i]),
        )
        for i in range(len(begin))
    ]  # fmt: skip


@pytest.mark.parametrize("case", ["all idle", "all overlapped", "all end early", "mixed"])
def test_slowed_finish_where_every_lane_takes_one_branch_is_the_scalar_one(case: str) -> None:
    """The paths that skip ``np.where`` (a mask true in every lane) and stop the loop (every lane ended, later spans
    left unread) give each lane's scalar result to the bit; a one-ulp change of any lane fails ``_same``."""
    rng = np.random.default_rng(7)
    spans = 9
    starts = np.sort(rng.uniform(0.1, 1.0, (spans, LANES)), axis=0)
    ends = starts + rng.uniform(0.0, 0.05, (spans, LANES))
    begin, factor = np.zeros(LANES), rng.uniform(0.05, 0.5, LANES)
    work = {
        "all idle": np.full(LANES, 5.0),  # longer than every span: each lane idles up to each span, then overlaps it
        "all overlapped": np.full(LANES, 2.0),
        "all end early": np.full(LANES, 0.01),  # every lane ends before the first span: the loop stops at once
        "mixed": rng.uniform(0.0, 1.2, LANES),
    }[case]
    if case == "all overlapped":  # back-to-back spans from t = 0: compute always beside the stream
        starts = np.cumsum(np.full((spans, LANES), 0.1), axis=0) - 0.1
        ends = starts + 0.1
    got = slowed_finish(begin, work, starts, ends, None, factor)
    want = _scalar_finish(begin, work, starts, ends, factor)
    assert _same(got, want)
    off = got.copy()
    off[3] = np.nextafter(off[3], np.inf)
    assert not _same(off, want)


def _settle_both(lane: LaneLedger, scalar: list[ContentionLedger], work: tuple, t: np.ndarray, slack: np.ndarray):
    issue, start, end, tag = work
    got = lane.settle(tag, issue, start, end, t, slack)
    want = [
        led.settle(tag, float(issue[i]), float(start[i]), float(end[i]), float(t[i]), float(slack[i]))
        for i, led in enumerate(scalar)
    ]
    for k in range(3):
        assert _same(got[k], [w[k] for w in want])
    return got


@pytest.mark.parametrize("seed", range(4))
def test_the_lane_ledger_settles_as_each_lanes_scalar_ledger(seed: int) -> None:
    """Backwards with three overlapped collectives each, the last issued as backward ends (DDP's last bucket),
    waited for in a shuffled order, one of them twice, and one backward's collectives waited for after the next
    backward began (Decent-DP's overlap); more backwards than the ledger keeps."""
    rng = np.random.default_rng(seed)
    factor = rng.uniform(0.05, 0.5, LANES)
    lane, scalar = LaneLedger(factor), [ContentionLedger(float(f)) for f in factor]
    clock, slack = rng.uniform(0.0, 1.0, LANES), np.zeros(LANES)
    late: list[tuple] = []
    for _ in range(11):
        lane.begin(clock)
        for i, led in enumerate(scalar):
            led.begin(float(clock[i]))
        works = []
        for k in range(3):
            if k == 2:  # the backward ends as the last bucket is issued
                lane.end(clock, slack)
                for i, led in enumerate(scalar):
                    led.end(float(clock[i]), float(slack[i]))
            tag = lane.tag(clock)
            assert all(led.tag(float(clock[i])) == tag for i, led in enumerate(scalar))
            start = clock + rng.uniform(0.0, 0.02, LANES)
            works.append((clock, start, start + rng.uniform(0.0, 0.05, LANES), tag))
            clock = clock + rng.uniform(0.0, 0.03, LANES) if k < 1 else clock
        order = [works[i] for i in rng.permutation(3)] + [works[0]]
        for work in late + order[: 2 + int(rng.integers(0, 3))]:
            owed, _, moved_end = _settle_both(lane, scalar, work, clock, slack)
            clock = pymax(clock + owed, moved_end)
            slack = slack + rng.uniform(0.0, 0.01, LANES)
        late = order[2:]


def test_a_tag_that_differs_between_lanes_is_refused() -> None:
    lane = LaneLedger(np.array([0.2, 0.2]))
    lane.begin(np.array([0.0, 0.0]))
    lane.end(np.array([1.0, 1.0]), np.zeros(2))
    assert lane.tag(np.array([1.0, 1.0])) == 1
    assert lane.tag(np.array([2.0, 2.0])) is None
    with pytest.raises(Diverged):
        lane.tag(np.array([1.0, 2.0]))


def test_contention_off_in_some_lanes_only_is_refused() -> None:
    assert not LaneLedger(np.zeros(3)).on
    with pytest.raises(Diverged):
        LaneLedger(np.array([0.0, 0.1]))
