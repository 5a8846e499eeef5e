"""Per-run summaries of the consensus-distance curve: how fast it falls, not where it ends.

A claim that compares the *final* consensus distances of two arms decides nothing once both sit at
float32 round-off: A²CiD²'s pure-gossip rings of 8 end at 1e-11 to 1e-14, and the ratio of two such
numbers is noise. What the paper states is a speed: the baseline's rate 1/chi1 against
A²CiD²'s 1/sqrt(chi1 chi2) (§3), "the same effect as doubling the communication rate" (Figure 1). So the
run reader (:mod:`distrepro.claims.runs`) derives, per run, from the logged history of
``consensus_distance`` (one value per evaluation, at MLflow step = gradients per worker: for an asynchronous
method the global step is gradients / world size), these numbers, which claims name like any metric
(:mod:`distrepro.metrics`: ``curve/...``) and which then go through the same paired statistics over seeds:

* ``curve/consensus_decay_rate``: minus the least-squares slope of ln(distance) against gradients per
  worker (e-folds per gradient), fitted on the **window above the round-off floor**: every evaluation from
  the first one up to, not including, the first at or below :data:`ROUND_OFF_FLOOR`; that one and all later
  ones are left out even if noise lifts one back above the floor. NaN with fewer than two points;
* ``curve/consensus_fit_points``: the evaluations in that window, for a regime condition ("enough points
  above noise to fit");
* ``curve/consensus_log_area``: the area under log10(distance) over the run's evaluations (trapezoids, from
  the first evaluation to the last) divided by the window's length, i.e. the mean log10 distance over the
  run; values at or below the floor count *at* the floor (below it is round-off, not a distance). The window
  is the run's evaluation grid, which the arms of one claim share (same config, budget and eval schedule);
* ``curve/consensus_above_floor``: the share of the run's evaluations above the floor.

The rule was fixed before any verdict was computed on it: the floor is the bound the consensus regime
conditions already used (float32 resolves 6e-8 relative, so a squared distance below about
1e-13 x |x|^2 is round-off; 1e-9 keeps a margin for |x|^2 up to 1e4), and the window is "everything above
it", with no tuning of its ends.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from distrepro import metrics as M

#: squared distances at or below this are float32 round-off (see the module docstring)
ROUND_OFF_FLOOR = 1.0e-9


@dataclass(frozen=True)
class CurveSummary:
    """The summaries of one run's curve (see the module docstring); NaN where undefined."""

    decay_rate: float
    fit_points: int
    log_area: float
    above_floor: float

    def columns(self) -> dict[str, float]:
        return {
            M.CONSENSUS_DECAY_RATE: self.decay_rate,
            M.CONSENSUS_FIT_POINTS: float(self.fit_points),
            M.CONSENSUS_LOG_AREA: self.log_area,
            M.CONSENSUS_ABOVE_FLOOR: self.above_floor,
        }


EMPTY = CurveSummary(math.nan, 0, math.nan, math.nan)


def fit_window(values: np.ndarray, floor: float = ROUND_OFF_FLOOR) -> int:
    """How many leading values lie above ``floor`` (the decay-rate window: it ends at the first value that
    does not, or that is not a finite number)."""
    for k, v in enumerate(values):
        if not (math.isfinite(v) and v > floor):
            return k
    return len(values)


def decay_rate(steps: np.ndarray, values: np.ndarray) -> float:
    """Minus the least-squares slope of ln(values) against steps; NaN with fewer than two distinct steps."""
    if len(steps) < 2 or np.ptp(steps) == 0:
        return math.nan
    slope = np.polyfit(steps.astype(float), np.log(values.astype(float)), 1)[0]
    return float(-slope)


def log_area(steps: np.ndarray, values: np.ndarray, floor: float = ROUND_OFF_FLOOR) -> float:
    """The mean of log10(max(value, floor)) over the window [first step, last step] (trapezoids)."""
    if len(values) == 0:
        return math.nan
    logs = np.log10(np.maximum(values.astype(float), floor))
    if len(values) == 1 or np.ptp(steps) == 0:
        return float(np.mean(logs))
    x = steps.astype(float)
    area = float(np.sum(np.diff(x) * (logs[1:] + logs[:-1]) / 2.0))
    return area / float(x[-1] - x[0])


def summarize(steps: npt.ArrayLike, values: npt.ArrayLike, floor: float = ROUND_OFF_FLOOR) -> CurveSummary:
    """The summaries of one curve: ``values`` of the consensus distance at ``steps`` (any order; NaNs dropped)."""
    x = np.asarray(steps, dtype=float)
    y = np.asarray(values, dtype=float)
    keep = ~np.isnan(y) & ~np.isnan(x)
    x, y = x[keep], y[keep]
    if len(y) == 0:
        return EMPTY
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    n = fit_window(y, floor)
    return CurveSummary(
        decay_rate=decay_rate(x[:n], y[:n]),
        fit_points=n,
        log_area=log_area(x, y, floor),
        above_floor=float(np.mean(y > floor)),
    )


def derive_curve_columns(runs: pd.DataFrame, curves: pd.DataFrame | None) -> pd.DataFrame:
    """``runs`` with the ``curve/consensus_*`` columns of every run whose curves hold a consensus distance
    (NaN for the others); unchanged when no run logged one."""
    metric = M.CONSENSUS_DISTANCE
    if curves is None or curves.empty or metric not in curves.columns or "run_id" not in runs.columns:
        return runs
    logged = curves.dropna(subset=[metric])
    by_run = {str(run_id): group for run_id, group in logged.groupby("run_id")}
    rows = []
    for run_id in runs["run_id"]:
        group = by_run.get(str(run_id))
        summary = EMPTY if group is None else summarize(group["step"].to_numpy(), group[metric].to_numpy())
        rows.append(summary.columns())
    frame = pd.DataFrame(rows, index=runs.index)
    return runs.assign(**{str(col): frame[col] for col in frame.columns})
