"""Verdict logic on hand-built run tables: every claim kind, every INCONCLUSIVE reason.

Expected numbers are worked out by hand in the comments, so a change in a statistic, a pairing
rule or a band edge shows up as a wrong number, not just a changed verdict.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from distrepro.claims.intervals import bca_interval, percentile_interval
from distrepro.claims.schema import validate_paper
from distrepro.claims.stats import stat
from distrepro.claims.verdicts import evaluate_claim, latest_per_seed
from distrepro.seeding import derive_seed

PROFILE = "hetero-2fast-2slow"
SRC = {"kind": "text"}
POINT = {"rule": "point"}  # tests of a point statistic's band edges (the default rule is ci)


#: a measured claim may not be judged by a point or a bootstrap interval below 10 seeds (tested in
#: test_acceptance.py); the arithmetic of those rules is tested here on 3-5 hand-built seeds, so
#: such claims are marked as deterministic (what a structural claim is) unless the test says otherwise
ARITHMETIC = {"decided_by": "model_structure", "why": "hand-built values: tests the rule's arithmetic"}


def _needs_ten_seeds(claim: dict[str, Any]) -> bool:
    acc = claim.get("accept", {})
    bootstrap = acc.get("statistic") in ("median", "olympic_mean") or acc.get("paired") is False
    return acc.get("rule") == "point" or acc.get("ci_method") in ("bca", "percentile") or bootstrap


def spec(*claims: dict[str, Any], **setup: Any) -> Any:
    data = {
        "kind": "reproduction",
        "citation": {"id": "handpaper", "title": "Hand-built"},
        "setup": {"profile": PROFILE, "baseline": "base", "min_seeds": 3, **setup},
        "claims": [
            {"source": SRC, "evidence": "verbatim", **(ARITHMETIC if _needs_ten_seeds(c) else {}), **c} for c in claims
        ],
    }
    return validate_paper(data)


class Table:
    """Builds a run table row by row; start times increase in insertion order (newest last)."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def add(self, method: str, seed: int, status: str = "FINISHED", profile: str = PROFILE, **metrics: Any) -> str:
        run_id = f"r{len(self.rows)}"
        self.rows.append(
            {
                "run_id": run_id,
                "method": method,
                "profile": profile,
                "seed": seed,
                "status": status,
                "start_time": pd.Timestamp("2026-01-01", tz="UTC") + pd.Timedelta(seconds=len(self.rows)),
                **metrics,
            }
        )
        return run_id

    def arm(self, method: str, column: str, values: dict[int, float], **extra: Any) -> list[str]:
        return [self.add(method, s, **{column: v}, **extra) for s, v in values.items()]

    @property
    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows)


def judge(s: Any, t: Table, curves: pd.DataFrame | None = None, i: int = 0) -> Any:
    return evaluate_claim(s.claims[i], s, t.frame, curves, "handpaper")


def curve_rows(run_id: str, points: list[tuple[float, float]], unit: str = "epoch") -> list[dict[str, Any]]:
    """Evaluations of one run: (unit value, val_accuracy); steps and emulated time follow the unit."""
    return [
        {"run_id": run_id, "step": 10 * (k + 1), unit: x, "time/emulated_s": 2.0 * x, "val_accuracy": acc}
        for k, (x, acc) in enumerate(points)
    ]


# ------------------------------------------------------------------ speedup


def _speedup_table() -> Table:
    t = Table()
    t.arm("base", "final/emulated_s", {0: 10.0, 1: 12.0, 2: 9.0})
    t.arm("fast", "final/emulated_s", {0: 5.0, 1: 4.0, 2: 4.5})
    return t


def test_speedup_paired_geometric_mean() -> None:
    # per-seed ratios 10/5=2, 12/4=3, 9/4.5=2 → geometric mean (2·3·2)^(1/3) = 12^(1/3) = 2.28943
    s = spec({"id": "s", "kind": "speedup", "arm": "fast", "claimed": 2.5, "accept": {"rel_tolerance": 0.1, **POINT}})
    v = judge(s, _speedup_table())
    assert v.verdict == "PASS"  # band [2.25, 2.75]
    assert v.statistic == pytest.approx(12 ** (1 / 3))
    assert v.points == {0: 2.0, 1: 3.0, 2: 2.0}
    assert v.band == pytest.approx((2.25, 2.75))
    # t-interval on the log-ratios: mean ln(12)/3, sd 0.23410, t(0.975, 2) = 4.30265 → exp(0.8283 ± 0.58156)
    assert v.ci == pytest.approx((1.27979, 4.09553), rel=1e-4)
    assert v.paired and v.ci_method == "t" and "paired by seed" in v.statistic_name
    assert v.per_seed == {"fast": {0: 5.0, 1: 4.0, 2: 4.5}, "base": {0: 10.0, 1: 12.0, 2: 9.0}}
    assert v.unit == "x" and v.n_seeds == 3


def test_speedup_outside_band_fails_and_one_sided_passes() -> None:
    claim = {"id": "s", "kind": "speedup", "arm": "fast", "claimed": 3.0, "accept": {"rel_tolerance": 0.1, **POINT}}
    v = judge(spec(claim), _speedup_table())
    assert v.verdict == "FAIL" and "outside the acceptance band [2.7×, 3.3×]" in v.reason
    low = {**claim, "claimed": 2.0, "accept": {"sided": "one_sided", **POINT}}  # "at least 2×": band [2, inf)
    v = judge(spec(low), _speedup_table())
    assert v.verdict == "PASS" and v.band == (2.0, math.inf)


def test_speedup_unpaired_median() -> None:
    # median(base) = 10, median(fast) = 4.5 → 2.2222
    claim = {
        "id": "s",
        "kind": "speedup",
        "arm": "fast",
        "claimed": 2.2,
        "accept": {"paired": False, "statistic": "median", **POINT},
    }
    v = judge(spec(claim), _speedup_table())
    assert v.statistic == pytest.approx(10 / 4.5)
    assert not v.paired and v.ci_method == "bca"  # no pivot for a ratio of medians
    assert v.verdict == "FAIL"  # zero tolerance: exactly 2.2 required
    claim["accept"]["abs_tolerance"] = 0.05
    assert judge(spec(claim), _speedup_table()).verdict == "PASS"


def test_speedup_to_target_from_curves() -> None:
    t = Table()
    rows: list[dict[str, Any]] = []
    for seed in range(3):  # fast reaches 0.5 at epoch 2 (emulated 4 s), base at epoch 4 (emulated 8 s)
        rows += curve_rows(t.add("fast", seed), [(1, 0.3), (2, 0.55), (3, 0.6)])
        rows += curve_rows(t.add("base", seed), [(2, 0.3), (4, 0.51), (6, 0.7)])
    target = {"metric": "val_accuracy", "value": 0.5, "direction": "max"}
    claim = {"id": "s", "kind": "speedup", "arm": "fast", "measure": "time_to_target", "target": target, "claimed": 2.0}
    v = judge(spec(claim), t, pd.DataFrame(rows))
    assert v.verdict == "PASS" and v.statistic == pytest.approx(2.0)
    assert v.per_seed["fast"] == {0: 4.0, 1: 4.0, 2: 4.0}  # emulated seconds at the crossing
    by_steps = judge(spec({**claim, "clock": "steps"}), t, pd.DataFrame(rows))
    assert by_steps.statistic == pytest.approx(20 / 20)  # both cross at their 2nd evaluation (step 20)


def test_speedup_to_target_not_reached_is_inconclusive() -> None:
    t = Table()
    for seed in range(3):
        t.add("fast", seed, time_to_target_s=1.0, target_reached=1.0)
        reached = seed != 1
        t.add("base", seed, target_reached=float(reached), **({"time_to_target_s": 3.0} if reached else {}))
    claim = {"id": "s", "kind": "speedup", "arm": "fast", "measure": "time_to_target", "claimed": 3.0}
    v = judge(spec(claim), t)
    assert v.verdict == "INCONCLUSIVE"
    assert v.reason == "target never reached within the budget ('base' seeds [1])"
    assert v.censored == {"base": {1: math.inf}}


# ------------------------------------------------------------------ final metric


@pytest.mark.parametrize(
    ("accept", "claimed", "verdict"),
    [
        ({"abs_tolerance": 0.01}, 0.926, "PASS"),  # median 0.92 in [0.916, 0.936]
        ({"abs_tolerance": 0.01}, 0.95, "FAIL"),  # [0.94, 0.96]
        ({"abs_tolerance": 0.01, "sided": "one_sided"}, 0.90, "PASS"),  # better than claimed passes
        ({"rel_tolerance": 0.02}, 0.94, "FAIL"),  # band [0.94·0.98, 0.94·1.02] = [0.9212, 0.9588] misses 0.92
    ],
)
def test_final_metric_median(accept: dict[str, Any], claimed: float, verdict: str) -> None:
    t = Table()
    t.arm("fast", "final/val_accuracy", {0: 0.90, 1: 0.92, 2: 0.95})
    claim = {"id": "f", "kind": "final_metric", "arm": "fast", "metric": "val_accuracy", "direction": "max"}
    v = judge(spec({**claim, "claimed": claimed, "accept": {**accept, "statistic": "median", **POINT}}), t)
    assert v.statistic == pytest.approx(0.92)  # 'val_accuracy' resolves to the logged final/val_accuracy
    assert v.verdict == verdict


def test_final_metric_one_sided_for_a_min_metric() -> None:
    t = Table()
    t.arm("fast", "final/val_loss", {0: 0.40, 1: 0.42, 2: 0.41})
    claim = {"id": "f", "kind": "final_metric", "arm": "fast", "metric": "final/val_loss", "direction": "min"}
    v = judge(spec({**claim, "claimed": 0.5, "accept": {"sided": "one_sided"}}), t)
    assert v.verdict == "PASS" and v.band == (-math.inf, 0.5)  # CI 0.41 ± 4.30·0.01/√3 = [0.385, 0.435]
    v = judge(spec({**claim, "claimed": 0.3, "accept": {"sided": "one_sided", "abs_tolerance": 0.05}}), t)
    assert v.verdict == "FAIL"  # the whole CI is above 0.35


def test_mean_and_olympic_mean() -> None:
    t = Table()
    t.arm("fast", "final/val_accuracy", {0: 0.5, 1: 0.9, 2: 0.92, 3: 0.95, 4: 0.99})
    claim = {
        "id": "f",
        "kind": "final_metric",
        "arm": "fast",
        "metric": "val_accuracy",
        "direction": "max",
        "claimed": 0.9,
    }
    olympic = judge(spec({**claim, "accept": {"statistic": "olympic_mean"}}), t)
    assert olympic.statistic == pytest.approx((0.9 + 0.92 + 0.95) / 3)  # min 0.5 and max 0.99 dropped
    mean = judge(spec({**claim, "accept": {"statistic": "mean"}}), t)
    assert mean.statistic == pytest.approx((0.5 + 0.9 + 0.92 + 0.95 + 0.99) / 5)


def test_rule_ci_is_the_default_and_the_interval_decides() -> None:
    # mean 0.9, sd 0.1: t-interval 0.9 ± 4.30265·0.1/√3 = [0.6516, 1.1484]
    t = Table()
    t.arm("fast", "final/val_accuracy", {0: 0.80, 1: 0.90, 2: 1.00})
    claim = {"id": "f", "kind": "final_metric", "arm": "fast", "metric": "val_accuracy", "direction": "max"}
    point = judge(spec({**claim, "claimed": 0.9, "accept": {"abs_tolerance": 0.05, **POINT}}), t)
    assert point.verdict == "PASS"  # mean 0.9 in [0.85, 0.95]
    ci = judge(spec({**claim, "claimed": 0.9, "accept": {"abs_tolerance": 0.05}}), t)
    assert ci.ci == pytest.approx((0.65159, 1.14841), rel=1e-4)
    assert ci.verdict == "INCONCLUSIVE"
    assert "wider than the acceptance band [0.85, 0.95]: it reaches past both edges" in ci.reason
    # s = 0.1 and 0.05 to either edge; a new run's interval carries the skew guard's f(n) (1.52 at 40 seeds, 1.62
    # from 30 to 39): t_39·1.52·0.1/√40 = 0.0486 < 0.05, t_38·1.62·0.1/√39 = 0.0525 is not (18 for a plain t-interval)
    assert "more seeds could decide: about 40 seeds" in ci.reason and ci.seeds_needed == 40
    far = judge(spec({**claim, "claimed": 0.5, "accept": {"abs_tolerance": 0.05}}), t)
    assert far.verdict == "FAIL" and "entirely outside the acceptance band" in far.reason


def test_rule_ci_inconclusive_says_which_edge_and_what_lies_beyond() -> None:
    # mean 0.32, sd 0.015811: t(0.975, 4) = 2.77645 → [0.30037, 0.33963]; symmetric values (G1 = 0), so the skew
    # guard widens both ends ×3.65 at n = 5 (distrepro.claims.intervals) → [0.24834, 0.39166], across the lower edge
    t = Table()
    t.arm("fast", "final/val_accuracy", {0: 0.30, 1: 0.31, 2: 0.32, 3: 0.33, 4: 0.34})
    claim = {"id": "f", "kind": "final_metric", "arm": "fast", "metric": "val_accuracy", "direction": "max"}
    v = judge(spec({**claim, "claimed": [0.33, 0.5]}), t)
    assert v.verdict == "INCONCLUSIVE" and v.ci == pytest.approx((0.24834, 0.39166), rel=1e-4)
    assert v.reason == (
        "CI of 0.32 [0.2483, 0.3917], n=5 straddles the lower edge 0.33 of the acceptance band [0.33, 0.5] "
        "(beyond it the result falls short of the claim); half-width 0.07166 towards the edge; more seeds could "
        "decide: about 30 seeds in a new run would clear it (n ≈ (t·s/d)², s the per-seed spread, d the distance "
        "to the edge; t times the skew guard's factor f(n) at that n, s from the plain t-interval)"
    )  # s = 0.015811 from the plain interval, d = 0.01: t_29·1.62·s/√30 < d (read off the widened one: 131)
    assert "widened ×3.65 from the plain t-interval [0.3004, 0.3396]" in v.skew_note
    high = judge(spec({**claim, "claimed": [0.1, 0.33]}), t)
    assert "straddles the upper edge 0.33" in high.reason and "exceeds the claim" in high.reason


# ------------------------------------------------------------------ relative improvement


def test_relative_improvement_fraction_of_time() -> None:
    # "training time reduced by about 72%": per seed 1 − 30/100, 1 − 25/100, 1 − 35/100; judged through the ratios
    # 100/30, 4, 100/35 (log transform): 1 − 1/geometric mean = 1 − (0.3·0.25·0.35)^(1/3) = 0.70280
    t = Table()
    t.arm("base", "final/emulated_s", {0: 100.0, 1: 100.0, 2: 100.0})
    t.arm("fast", "final/emulated_s", {0: 30.0, 1: 25.0, 2: 35.0})
    claim = {"id": "r", "kind": "relative_improvement", "arm": "fast", "metric": "final/emulated_s", "direction": "min"}
    v = judge(spec({**claim, "claimed": 0.72, "accept": {"abs_tolerance": 0.05, **POINT}}), t)
    assert (
        v.verdict == "PASS"
        and v.statistic == pytest.approx(1 - (0.3 * 0.25 * 0.35) ** (1 / 3))
        and v.unit == "fraction"
    )
    assert "geometric mean of per-seed ratios" in v.statistic_name
    assert v.points == pytest.approx({0: 0.70, 1: 0.75, 2: 0.65})
    rng = judge(spec({**claim, "claimed": [0.33, 0.5]}), t)  # "one-third to half"
    assert rng.verdict == "FAIL" and rng.band == pytest.approx((0.33, 0.5))


def test_relative_improvement_ratio_of_flops() -> None:
    # "21.6 times the FLOPS": ratios 21, 22, 20 → geometric mean 9240^(1/3) = 20.98
    t = Table()
    t.arm("base", "final/useful_flops_per_emulated_s", {0: 1e9, 1: 1e9, 2: 1e9})
    t.arm("fast", "final/useful_flops_per_emulated_s", {0: 21e9, 1: 22e9, 2: 20e9})
    claim = {
        "id": "r", "kind": "relative_improvement", "arm": "fast", "metric": "final/useful_flops_per_emulated_s",
        "direction": "max", "form": "ratio", "claimed": 21.6,
        "accept": {"statistic": "geometric_mean", "rel_tolerance": 0.1},
    }  # fmt: skip
    assert judge(spec(claim), t).verdict == "INCONCLUSIVE"  # t-interval [18.63, 23.63] crosses 19.44 (band 21.6 ± 10%)
    claim["accept"] |= POINT
    v = judge(spec(claim), t)
    assert v.statistic == pytest.approx(9240 ** (1 / 3)) and v.verdict == "PASS"


# ------------------------------------------------------------------ convergence


def _convergence(points_by_seed: dict[int, list[tuple[float, float]]]) -> tuple[Table, pd.DataFrame]:
    t, rows = Table(), []
    for seed, pts in points_by_seed.items():
        rows += curve_rows(t.add("fast", seed), pts)
    return t, pd.DataFrame(rows)


CONV = {
    "id": "c", "kind": "convergence", "arm": "fast", "unit": "epochs", "claimed": 4,
    "target": {"metric": "val_accuracy", "value": 0.5, "direction": "max"},
    "accept": {"rel_tolerance": 0.25, "statistic": "median", "rule": "point"},
}  # fmt: skip


def test_convergence_epochs_to_target() -> None:
    # first evaluation ≥ 0.5 at epochs 3, 4, 5 → median 4, band [3, 5]
    t, curves = _convergence(
        {0: [(1, 0.2), (3, 0.5), (5, 0.6)], 1: [(2, 0.3), (4, 0.55)], 2: [(1, 0.1), (3, 0.45), (5, 0.7)]}
    )
    v = judge(spec(CONV), t, curves)
    assert v.verdict == "PASS" and v.statistic == pytest.approx(4.0)
    assert v.per_seed["fast"] == {0: 3.0, 1: 4.0, 2: 5.0}


def test_convergence_unreached_past_the_band_fails() -> None:
    # never reached within 10 epochs: the median is at least 10 > 5, whatever happens later
    t, curves = _convergence({s: [(5, 0.2), (10, 0.3)] for s in range(3)})
    v = judge(spec(CONV), t, curves)
    assert v.verdict == "FAIL" and v.statistic == pytest.approx(10.0)
    assert v.censored == {"fast": {0: 10.0, 1: 10.0, 2: 10.0}}


def test_convergence_unreached_within_the_band_is_inconclusive() -> None:
    short = {s: [(1, 0.2), (3, 0.3)] for s in range(3)}  # budget ended at epoch 3 (≤ 5): could still pass
    v = judge(spec(CONV), *_convergence(short))
    assert v.verdict == "INCONCLUSIVE" and v.reason.startswith("target never reached within the budget")
    mixed = {0: [(3, 0.6)], 1: [(4, 0.6)], 2: [(10, 0.1)]}  # lower bound median 4 ≤ 5
    assert judge(spec(CONV), *_convergence(mixed)).verdict == "INCONCLUSIVE"


# ------------------------------------------------------------------ which way a FAIL missed


def test_a_fail_says_whether_it_exceeds_or_falls_short_of_the_claim() -> None:
    # C-ADP cut time by 94.8% where 72% ± 5 was claimed: a FAIL of the claim as stated, in the paper's favour
    t = Table()
    t.arm("base", "final/emulated_s", {0: 100.0, 1: 100.0, 2: 100.0})
    t.arm("fast", "final/emulated_s", {0: 5.0, 1: 5.2, 2: 5.4})
    cut = {"id": "r", "kind": "relative_improvement", "arm": "fast", "metric": "final/emulated_s", "direction": "min"}
    v = judge(spec({**cut, "claimed": 0.72, "accept": {"abs_tolerance": 0.05}}), t)
    assert v.verdict == "FAIL" and v.miss == "exceeds the claim"
    assert v.reason.endswith("outside the acceptance band [67.0%, 77.0%]: exceeds the claim")
    v = judge(spec({**cut, "claimed": 0.99, "accept": {"abs_tolerance": 0.005, "rule": "ci"}}), t)
    assert v.verdict == "FAIL" and v.reason.endswith(": falls short of the claim")
    speedup = {"id": "s", "kind": "speedup", "arm": "fast", "claimed": 3.0, "accept": {"rel_tolerance": 0.1, **POINT}}
    v = judge(spec(speedup), _speedup_table())  # 2.29× against [2.7×, 3.3×]
    assert v.miss == "falls short of the claim" and v.to_dict()["miss"] == "falls short of the claim"
    assert judge(spec({**speedup, "claimed": 2.5}), _speedup_table()).miss == ""  # a PASS missed nothing


def test_for_lower_is_better_a_result_below_the_band_exceeds_the_claim() -> None:
    t = Table()
    t.arm("fast", "final/val_loss", {0: 0.40, 1: 0.42, 2: 0.41})
    loss = {"id": "f", "kind": "final_metric", "arm": "fast", "metric": "final/val_loss", "direction": "min"}
    assert judge(spec({**loss, "claimed": 0.6, "accept": {"abs_tolerance": 0.05}}), t).miss == "exceeds the claim"
    assert judge(spec({**loss, "claimed": 0.2}), t).miss == "falls short of the claim"
    # convergence in 3–5 epochs (median 4) where 8 ± 25% were claimed: faster than claimed
    t, curves = _convergence(
        {0: [(1, 0.2), (3, 0.5), (5, 0.6)], 1: [(2, 0.3), (4, 0.55)], 2: [(1, 0.1), (3, 0.45), (5, 0.7)]}
    )
    v = judge(spec({**CONV, "claimed": 8}), t, curves)
    assert v.verdict == "FAIL" and v.reason.endswith(": exceeds the claim")
    never = judge(spec(CONV), *_convergence({s: [(5, 0.2), (10, 0.3)] for s in range(3)}))
    assert never.verdict == "FAIL" and never.miss == "falls short of the claim"


# ------------------------------------------------------------------ ordering, non-inferiority


def _three_arms() -> Table:
    t = Table()
    t.arm("a", "final/val_accuracy", {0: 0.90, 1: 0.91, 2: 0.92})
    t.arm("b", "final/val_accuracy", {0: 0.80, 1: 0.82, 2: 0.81})
    t.arm("c", "final/val_accuracy", {0: 0.70, 1: 0.72, 2: 0.71})
    return t


@pytest.mark.parametrize(
    ("arms", "margin", "verdict", "gap"),
    [
        (["a", "b", "c"], 0.0, "PASS", 0.10),
        (["a", "b", "c"], 0.15, "FAIL", 0.10),
        (["c", "b", "a"], 0.0, "FAIL", -0.10),
    ],
)
def test_ordering(arms: list[str], margin: float, verdict: str, gap: float) -> None:
    # medians 0.91, 0.81, 0.71 → adjacent gaps 0.10 and 0.10
    claim = {
        "id": "o",
        "kind": "ordering",
        "arms": arms,
        "metric": "final/val_accuracy",
        "direction": "max",
        "margin": margin,
    }
    v = judge(spec(claim), _three_arms())
    assert v.verdict == verdict and v.statistic == pytest.approx(gap)
    assert "observed a (0.91) > b (0.81) > c (0.71)" in v.reason


@pytest.mark.parametrize(
    ("arm_values", "verdict", "mean"),
    [
        ({0: 0.903, 1: 0.910, 2: 0.917}, "PASS", 0.0),  # diffs −0.002, 0, +0.002: t-CI ±0.00497 ≥ −0.01
        ({0: 0.850, 1: 0.860, 2: 0.870}, "FAIL", -0.05),  # diffs ≈ −0.05: the whole CI is below −0.01
        ({0: 0.875, 1: 0.910, 2: 0.925}, "INCONCLUSIVE", -0.02 / 3),  # diffs −0.03, 0, +0.01: CI reaches −0.03
    ],
)
def test_non_inferiority(arm_values: dict[int, float], verdict: str, mean: float) -> None:
    t = Table()
    t.arm("base", "final/val_accuracy", {0: 0.905, 1: 0.910, 2: 0.915})
    t.arm("fast", "final/val_accuracy", arm_values)
    claim = {
        "id": "n",
        "kind": "non_inferiority",
        "arm": "fast",
        "metric": "final/val_accuracy",
        "direction": "max",
        "margin": 0.01,
    }
    v = judge(spec(claim), t)
    assert v.verdict == verdict and v.statistic == pytest.approx(mean, abs=1e-12)
    assert v.band == (-0.01, math.inf)


def test_non_inferiority_relative_margin() -> None:
    t = Table()
    t.arm("base", "final/val_loss", {0: 1.0, 1: 1.0, 2: 1.0})
    t.arm("fast", "final/val_loss", {0: 1.04, 1: 1.04, 2: 1.04})  # 4% worse on a min metric
    claim = {
        "id": "n", "kind": "non_inferiority", "arm": "fast", "metric": "final/val_loss", "direction": "min",
        "margin": 0.05, "margin_kind": "rel",
    }  # fmt: skip
    v = judge(spec(claim), t)
    assert v.verdict == "PASS" and v.statistic == pytest.approx(-0.04) and v.band[0] == pytest.approx(-0.05)


# ------------------------------------------------------------------ INCONCLUSIVE reasons


SPEEDUP = {"id": "s", "kind": "speedup", "arm": "fast", "claimed": 2.0, "accept": {"rel_tolerance": 0.5}}


def test_arm_missing() -> None:
    t = Table()
    t.arm("fast", "final/emulated_s", {0: 1.0, 1: 1.0, 2: 1.0})
    t.arm("base", "final/emulated_s", {0: 2.0, 1: 2.0, 2: 2.0}, profile="homogeneous-4")  # other profile
    v = judge(spec(SPEEDUP), t)
    assert v.verdict == "INCONCLUSIVE"
    assert v.reason == "arm missing: no runs of 'base' (method base) on profile 'hetero-2fast-2slow'"


def test_arm_failed() -> None:
    t = Table()
    t.arm("fast", "final/emulated_s", {0: 1.0, 1: 1.0, 2: 1.0})
    for seed, status in ((0, "FAILED"), (1, "KILLED"), (2, "RUNNING")):
        t.add("base", seed, status=status)
    v = judge(spec(SPEEDUP), t)
    assert v.verdict == "INCONCLUSIVE"
    assert v.reason == (
        "arm failed: no finished run of 'base' on profile 'hetero-2fast-2slow' "
        "(seed 0 FAILED, seed 1 KILLED, seed 2 RUNNING)"
    )


def test_too_few_seeds() -> None:
    t = Table()
    t.arm("fast", "final/emulated_s", {0: 1.0, 1: 1.0, 2: 1.0})
    t.arm("base", "final/emulated_s", {0: 2.0, 1: 2.0})
    t.add("base", 2, status="FAILED")
    v = judge(spec(SPEEDUP), t)
    assert v.verdict == "INCONCLUSIVE"
    assert v.reason == "too few seeds: 2 with both 'fast' and 'base' finished (seeds [0, 1]), 3 required"
    assert judge(spec(SPEEDUP, min_seeds=2), t).verdict == "PASS"
    unpaired = {**SPEEDUP, "accept": {"paired": False}}
    assert judge(spec(unpaired), t).reason == "too few seeds: 'base' has 2 usable (seeds [0, 1]), 3 required"


def test_paired_needs_common_seeds() -> None:
    t = Table()
    t.arm("fast", "final/emulated_s", {0: 1.0, 1: 1.0, 2: 1.0})
    t.arm("base", "final/emulated_s", {2: 2.0, 3: 2.0, 4: 2.0})
    assert judge(spec(SPEEDUP), t).reason.startswith("too few seeds: 1 with both")


def test_metric_not_logged() -> None:
    t = Table()
    t.arm("fast", "final/val_loss", {0: 1.0, 1: 1.0, 2: 1.0})
    claim = {
        "id": "f",
        "kind": "final_metric",
        "arm": "fast",
        "metric": "method/bleu",
        "direction": "max",
        "claimed": 1,
    }
    v = judge(spec(claim), t)
    assert v.verdict == "INCONCLUSIVE" and v.reason == "metric 'method/bleu' was not logged by arm 'fast'"


# ------------------------------------------------------------------ selection, determinism


def test_newest_finished_run_per_seed_counts() -> None:
    t = Table()
    t.add("fast", 0, **{"final/emulated_s": 10.0})
    t.add("fast", 0, **{"final/emulated_s": 20.0})  # rerun: replaces the first
    t.add("fast", 1, **{"final/emulated_s": 5.0})
    t.add("fast", 1, status="FAILED")  # a failed rerun does not erase a finished run
    t.add("fast", 2, status="FAILED")
    done, bad = latest_per_seed(t.frame)
    assert done["final/emulated_s"].to_dict() == {0: 20.0, 1: 5.0}
    assert bad == {2: "FAILED"}


def test_arm_params_and_scale_select_runs() -> None:
    t = Table()
    for seed in range(3):
        t.add("local_sgd", seed, **{"params.method_params.period": "4", "final/val_accuracy": 0.8})
        t.add("local_sgd", seed, **{"params.method_params.period": "8", "final/val_accuracy": 0.6})
        t.add("local_sgd", seed, scale="paper", **{"params.method_params.period": "4", "final/val_accuracy": 0.1})
    arms = {
        "h4": {"method": "local_sgd", "params": {"period": 4}},
        "h8": {"method": "local_sgd", "params": {"period": 8.0}},
    }
    claim = {"id": "o", "kind": "ordering", "arms": ["h4", "h8"], "metric": "final/val_accuracy", "direction": "max"}
    v = judge(spec(claim, arms=arms, baseline=None), t)  # scale: proxy by default, the 'paper' rows are ignored
    assert v.verdict == "PASS" and v.statistic == pytest.approx(0.2)


def test_bootstrap_is_deterministic_per_claim() -> None:
    t = Table()
    values = {0: 0.7013, 1: 0.9034, 2: 0.7521, 3: 0.9487, 4: 0.7975}  # irregular: resampled means do not tie
    t.arm("fast", "final/val_accuracy", values)
    claim = {
        "id": "f1", "kind": "final_metric", "arm": "fast", "metric": "val_accuracy", "direction": "max",
        "claimed": 0.8, "accept": {"statistic": "mean", "ci_method": "bca"},
    }  # fmt: skip
    first, again = judge(spec(claim), t), judge(spec(claim), t)
    assert first.ci == again.ci and first.ci_method == "bca"
    # the generator is seeded from (paper, claim id), nothing else
    seed = derive_seed("claims", "handpaper", "f1")
    expected = bca_interval([np.array(list(values.values()))], lambda s: stat(s[0], "mean"), seed, 2000, 0.95)
    assert first.statistic == pytest.approx(0.8206) and first.ci == expected
    assert judge(spec({**claim, "accept": {"statistic": "median"}}), t).ci_method == "bca"  # no t for a median
    other = judge(spec({**claim, "id": "f2"}), t)
    assert other.statistic == first.statistic and other.ci != first.ci  # another claim draws other resamples
    json.dumps(first.to_dict())


def test_statistics_on_the_last_axis() -> None:
    x = [[1.0, 2.0, 4.0], [2.0, 2.0, 2.0]]
    assert stat(x, "geometric_mean").tolist() == pytest.approx([2.0, 2.0])
    assert math.isnan(float(stat([1.0, -1.0], "geometric_mean")))
    for method in (bca_interval, percentile_interval):
        lo, hi = method([np.array([3.0, 3.0, 3.0])], lambda s: stat(s[0], "median"), 1, 200, 0.9)
        assert lo == hi == 3.0
