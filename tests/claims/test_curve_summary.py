"""Issue 24: convergence claims judged on the decay rate and the log area of the consensus curve.

Fabricated histories only: every curve is written down by hand (an exact exponential, one that hits the
round-off floor, a flat one, one too short to fit), so each expected number is worked out in the comments
and every verdict can be flipped by moving one fabricated rate across another.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from test_verdicts import Table, spec

from distrepro import metrics as M
from distrepro.claims.curve_summary import ROUND_OFF_FLOOR, derive_curve_columns, summarize
from distrepro.claims.verdicts import evaluate_claim

STEPS = [4.0 * k for k in range(1, 11)]  # the gossip configs' evaluations: every 4 gradients per worker, 40 in all
RATE = "curve/consensus_decay_rate"
AREA = "curve/consensus_log_area"
FIT = "curve/consensus_fit_points"


def _exp(start: float, rate: float, steps: list[float] = STEPS) -> list[float]:
    """d(t) = start * exp(-rate * (t - 4)): the distance at each evaluation, first one at step 4."""
    return [start * math.exp(-rate * (t - steps[0])) for t in steps]


def test_the_decay_rate_of_an_exact_exponential_is_its_rate() -> None:
    s = summarize(STEPS, _exp(0.5, 0.3))  # 0.5 down to 0.5 e^-10.8 = 1.0e-5: every point above the floor
    assert s.decay_rate == pytest.approx(0.3, rel=1e-12)
    assert s.fit_points == 10 and s.above_floor == 1.0
    # log10 d is linear in t, so its trapezoid mean is the mean of the ends: log10 0.5 - 0.3 * 18 / ln 10
    assert s.log_area == pytest.approx(math.log10(0.5) - 0.3 * 18 / math.log(10), rel=1e-12)


def test_the_order_of_the_evaluations_does_not_matter() -> None:
    values = _exp(0.2, 0.5)
    shuffled = [7, 2, 9, 0, 4, 1, 8, 3, 6, 5]
    s = summarize([STEPS[i] for i in shuffled], [values[i] for i in shuffled])
    assert s.decay_rate == pytest.approx(0.5, rel=1e-12) and s.fit_points == 10


def test_the_fit_stops_at_the_first_evaluation_at_the_round_off_floor() -> None:
    """1e-2 e^{-2(t-4)}: steps 4..12 above 1e-9 (step 12: 1.1e-9), step 16 at 3.8e-13, then round-off noise,
    one value of which noise lifts back above the floor (5e-9 at step 36): it stays out of the fit."""
    values = [*_exp(1e-2, 2.0)[:3], 3.8e-13, 2e-14, 7e-14, 1e-13, 4e-14, 5e-9, 3e-14]
    s = summarize(STEPS, values)
    assert s.fit_points == 3
    assert s.decay_rate == pytest.approx(2.0, rel=1e-12)
    # the same points fitted without the window: round-off flattens the slope to well under the true rate
    naive = -np.polyfit(STEPS, np.log(values), 1)[0]
    assert naive < 1.0
    # area: values at or below 1e-9 count at the floor (-9); above it their own log10
    logs = np.log10(np.maximum(values, ROUND_OFF_FLOOR))
    expected = float(np.sum(np.diff(STEPS) * (logs[1:] + logs[:-1]) / 2) / (STEPS[-1] - STEPS[0]))
    assert s.log_area == pytest.approx(expected)
    assert s.above_floor == pytest.approx(0.4)  # 3 decaying points and the noisy 5e-9 of 10


def test_a_flat_curve_decays_at_rate_zero() -> None:
    s = summarize(STEPS, [0.02] * 10)
    assert s.decay_rate == pytest.approx(0.0, abs=1e-12)
    assert s.log_area == pytest.approx(math.log10(0.02))


def test_a_curve_at_the_floor_from_the_start_has_no_rate() -> None:
    s = summarize(STEPS, [1e-13] * 10)
    assert s.fit_points == 0 and math.isnan(s.decay_rate)
    assert s.log_area == pytest.approx(-9.0) and s.above_floor == 0.0
    assert math.isnan(summarize([], []).log_area)


# ------------------------------------------------------------------ through the claims engine


def _runs(curves_of: dict[str, dict[int, list[float]]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A run table and its curves: one run per (arm, seed), its consensus distance at STEPS."""
    t = Table()
    rows: list[dict[str, Any]] = []
    for arm, seeds in curves_of.items():
        for seed, values in seeds.items():
            run_id = t.add(arm, seed, **{M.final(M.CONSENSUS_DISTANCE): values[-1]})
            points = zip(STEPS, values, strict=True)
            rows += [{"run_id": run_id, "step": int(x), M.CONSENSUS_DISTANCE: v} for x, v in points]
    curves = pd.DataFrame(rows)
    return derive_curve_columns(t.frame, curves), curves


def _judge(claim: dict[str, Any], curves_of: dict[str, dict[int, list[float]]]) -> Any:
    runs, curves = _runs(curves_of)
    s = spec(claim)
    return evaluate_claim(s.claims[0], s, runs, curves, "handpaper")


FASTER = {
    "id": "CD-r1", "kind": "relative_improvement", "arm": "acid", "baseline": "base", "metric": RATE,
    "direction": "max", "form": "ratio", "claimed": 1.0, "accept": {"sided": "one_sided"},
}  # fmt: skip
WIGGLE = {0: 1.00, 1: 1.03, 2: 0.98}  # per-seed factors on the rates, so the paired log-ratios have a spread


def _gossip(arm_rate: float, base_rate: float) -> dict[str, dict[int, list[float]]]:
    return {
        "acid": {s: _exp(0.4, arm_rate * w) for s, w in WIGGLE.items()},
        "base": {s: _exp(0.4, base_rate * w * (1.0 if s != 1 else 0.99)) for s, w in WIGGLE.items()},
    }


def test_the_verdict_flips_when_the_fabricated_rates_cross() -> None:
    faster = _judge(FASTER, _gossip(arm_rate=0.45, base_rate=0.30))
    assert faster.verdict == "PASS", faster.reason
    assert faster.statistic == pytest.approx(1.5, rel=0.01)  # per-seed ratios 1.5, 1.515, 1.5
    slower = _judge(FASTER, _gossip(arm_rate=0.20, base_rate=0.30))
    assert slower.verdict == "FAIL", slower.reason
    assert slower.statistic == pytest.approx(2 / 3, rel=0.01)


def test_the_final_values_at_round_off_would_have_decided_the_other_way() -> None:
    """The A²CiD² arm decays faster (rate 1.0 against 0.6) and reaches the floor first; at round-off its final
    value (2e-14) is *above* the baseline's (1e-14) by chance, so a ratio of final values says slower."""
    acid = {s: [*_exp(0.4, 1.0 * w)[:5], 3e-13, 1e-13, 4e-14, 3e-14, 2e-14] for s, w in WIGGLE.items()}
    base = {s: [*_exp(0.4, 0.6 * w)[:7], 2e-13, 5e-14, 1e-14] for s, w in WIGGLE.items()}
    final_ratio = {**FASTER, "metric": M.final(M.CONSENSUS_DISTANCE), "direction": "min"}
    assert _judge(final_ratio, {"acid": acid, "base": base}).verdict == "FAIL"
    on_rate = _judge(FASTER, {"acid": acid, "base": base})
    assert on_rate.verdict == "PASS", on_rate.reason
    assert on_rate.statistic == pytest.approx(1 / 0.6, rel=0.01)


FIT_COND = {
    "id": "baseline_fit_points", "what": "the baseline stays above round-off for at least 4 evaluations",
    "source": "a rate is a slope: 4 points leave 2 residual degrees of freedom", "metric": FIT, "arm": "base",
    "at_least": 4,
}  # fmt: skip


def test_too_few_points_above_the_floor_is_outside_the_regime_with_the_measured_value() -> None:
    curves = _gossip(arm_rate=0.45, base_rate=0.30)
    curves["base"][2] = _exp(0.4, 3.0)[:3] + [1e-13] * 7  # seed 2: 4e-1, 2.5e-6, 1.5e-11: two points above 1e-9
    v = _judge({**FASTER, "regime": [FIT_COND]}, curves)
    assert v.verdict == "INCONCLUSIVE" and v.out_of_regime
    assert v.reason.startswith(
        "outside the paper's regime: the baseline stays above round-off for at least 4 evaluations, measured 2"
    )
    assert v.statistic is None  # decided before the CI
    # with enough points on every seed the same claim is decided by its CI
    assert _judge({**FASTER, "regime": [FIT_COND]}, _gossip(0.45, 0.30)).verdict == "PASS"


def test_a_baseline_that_never_leaves_the_floor_is_explained_by_the_regime_not_by_a_missing_value() -> None:
    curves = _gossip(arm_rate=0.45, base_rate=0.30)
    curves["base"] = {s: [1e-13] * 10 for s in WIGGLE}  # no rate on any seed: NaN everywhere
    v = _judge({**FASTER, "regime": [FIT_COND]}, curves)
    assert v.out_of_regime and "measured 0" in v.reason
    bare = _judge(FASTER, curves)  # without the condition: the missing value is all there is to say
    assert bare.verdict == "INCONCLUSIVE" and bare.reason.startswith("no usable value of 'curve/consensus_decay_rate'")


CLOSE = {
    "id": "HET-double", "kind": "relative_improvement", "arm": "acid", "baseline": "base", "metric": AREA,
    "direction": "min", "form": "difference", "claimed": 0.0,
    "accept": {"sided": "one_sided", "abs_tolerance": 0.30103},
}  # fmt: skip


@pytest.mark.parametrize(("factor", "verdict"), [(1.5, "PASS"), (3.0, "FAIL")])
def test_the_log_area_band_is_a_factor_two_in_distance(factor: float, verdict: str) -> None:
    """A²CiD²'s curve sits ``factor`` times above the baseline's at every evaluation: the paired difference of
    mean log10 distances is -log10(factor), inside the -log10 2 = -0.301 band for 1.5, outside for 3."""
    level = {0: 0.010, 1: 0.012, 2: 0.011}
    wiggle = {0: 1.0, 1: 1.02, 2: 0.97}
    rising = [1 - math.exp(-t / 8) for t in STEPS]  # rises to a plateau, as heterogeneous objectives do
    curves = {
        "acid": {s: [factor * wiggle[s] * level[s] * r for r in rising] for s in level},
        "base": {s: [level[s] * r for r in rising] for s in level},
    }
    v = _judge(CLOSE, curves)
    assert v.verdict == verdict, v.reason
    assert v.statistic == pytest.approx(-math.log10(factor) - np.mean([math.log10(w) for w in wiggle.values()]))


def test_runs_without_a_consensus_curve_are_left_alone() -> None:
    t = Table()
    t.add("ar", 0, **{"final/val_accuracy": 0.9})
    runs = t.frame
    assert derive_curve_columns(runs, pd.DataFrame(columns=["run_id", "step"])).equals(runs)
    assert derive_curve_columns(runs, None).equals(runs)
    other = pd.DataFrame([{"run_id": "elsewhere", "step": 4, M.CONSENSUS_DISTANCE: 0.1}])
    out = derive_curve_columns(runs, other)  # a curve of another run: this run gets no summary
    assert math.isnan(out.loc[0, RATE]) and out.loc[0, FIT] == 0


def test_claims_may_name_the_curve_summaries() -> None:
    for name in M.CURVE_SUMMARIES:
        assert M.unknown_metric(name) is None
    assert M.unknown_metric("curve/consensus_decay") is not None
