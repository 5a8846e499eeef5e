"""How per-rank reports become one evaluation: the rules both engines share (distrepro/engine/rank_reports.py)."""

from __future__ import annotations

import math

import pytest

from distrepro.engine.rank_reports import Progress, RankReport, aggregate_records, assemble
from distrepro.job.results import WorkerTotals

pytestmark = pytest.mark.smoke


def test_records_are_the_mean_over_the_ranks_that_recorded_them_and_each_ranks_value() -> None:
    per_rank = {1: {"h": 4.0}, 0: {"h": 1.0, "lr": 0.1}, 2: {"h": 2.5}}
    assert aggregate_records(per_rank) == {
        "h": 2.5,
        "h/rank0": 1.0,
        "h/rank1": 4.0,
        "h/rank2": 2.5,
        "lr": 0.1,  # only rank 0 recorded it: its mean is rank 0's value
        "lr/rank0": 0.1,
    }
    assert aggregate_records({0: {}, 1: {}}) == {}


def _report(rank: int, gradients: int, clock_s: float, loss: tuple[float, int], wall_s: float = 1.0) -> RankReport:
    totals = WorkerTotals(rank, clock_s, clock_s, 0.0, 0.0, 100.0, 8 * gradients, gradients)
    progress = Progress(gradients // 2, gradients / 10, 8 * gradients, gradients, clock_s, wall_s)
    return RankReport(totals, {"x": float(rank)}, loss[0], loss[1], progress)


def test_an_evaluation_takes_the_earliest_progress_and_the_latest_clock_at_a_common_point() -> None:
    # rank 1 saw the point crossed first (gradient 4); rank 0 reports later, at gradient 5
    reports = [_report(0, 5, 3.0, (2.0, 2), wall_s=7.0), _report(1, 4, 2.0, (1.0, 1), wall_s=9.0)]
    metrics = {"val_loss": 0.5}
    in_flight = assemble(reports, metrics, final=False, lockstep=False)
    assert (in_flight.step, in_flight.samples, in_flight.emulated_s) == (2, 32, 2.0)  # rank 1's view
    assert in_flight.wall_s == 7.0  # rank 0's, who evaluates
    assert in_flight.metrics == {"val_loss": 0.5, "train_loss": 1.0}  # 3.0 / 3 losses, over every rank
    assert [w.rank for w in in_flight.workers] == [0, 1]
    assert in_flight.method_records == {"x": 0.5, "x/rank0": 0.0, "x/rank1": 1.0}
    assert assemble(reports, metrics, final=True, lockstep=False).emulated_s == 3.0  # everyone has arrived
    assert assemble(reports, metrics, final=False, lockstep=True).emulated_s == 3.0
    assert math.isnan(assemble([_report(0, 1, 1.0, (0.0, 0))], metrics, True, True).metrics["train_loss"])
