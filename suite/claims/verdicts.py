"""Verdicts: PASS / FAIL / INCONCLUSIVE for each claim, with the statistic, its CI and per-seed values.

Input is a tidy run table (one row per run; see :mod:`suite.claims.runs` for the columns) and,
for claims with an explicit quality target, the per-evaluation curves. Nothing here touches
MLflow or files, so the rules can be tested on hand-built tables.

Rules, in the order they are applied to every arm a claim needs:

1. *arm missing*: no run of the arm on the claim's profile → INCONCLUSIVE;
2. *arm failed*: runs exist but none FINISHED → INCONCLUSIVE (a failed run is not evidence);
3. *target never reached* within the budget → INCONCLUSIVE, except for ``convergence`` where the
   unreached seeds count at their final epoch/step as a lower bound: if even that lower bound is
   past the acceptance band, the claim FAILS (the budget was long enough to see it fail);
4. *too few seeds*: fewer usable seeds (for paired statistics: seeds where both arms finished)
   than ``accept.min_seeds`` → INCONCLUSIVE.

Per seed, the newest FINISHED run counts (a rerun replaces an earlier one). Statistics are the
median, the mean, the geometric mean (for ratios, AlgoPerf's choice for speedups) or the olympic
mean (MLPerf: drop min and max), over seeds; paired claims first form per-seed ratios or
differences. CIs are percentile bootstraps whose generator is seeded from the paper and claim id
(:func:`suite.seeding.derive_seed`), so a report is bit-for-bit reproducible.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from suite.claims.schema import Claim, PaperSpec, acceptance_band
from suite.claims.stats import bootstrap, fmt, json_safe, stat
from suite.runlog import flatten_params
from suite.seeding import derive_seed

VerdictKind = Literal["PASS", "FAIL", "INCONCLUSIVE"]
#: claim unit → curve column
UNIT_COLUMN = {
    "emulated": "time/emulated_s",
    "emulated_s": "time/emulated_s",
    "wall": "time/wall_s",
    "steps": "step",
    "epochs": "epoch",
    "samples": "samples",
}
_TARGET_SUMMARIES = {"time_to_target_s", "step_to_target"}


@dataclass
class Verdict:
    claim_id: str
    kind: str
    verdict: VerdictKind
    reason: str
    statistic: float | None = None
    ci: tuple[float, float] | None = None
    band: tuple[float, float] | None = None  # acceptance band (or threshold as (t, inf))
    statistic_name: str = ""
    unit: str = ""  # "x" ratio, "fraction", or the metric/unit name
    n_seeds: int = 0
    points: dict[int, float] = field(default_factory=dict)  # per seed, in the statistic's units
    per_seed: dict[str, dict[int, float]] = field(default_factory=dict)  # arm → seed → raw value
    censored: dict[str, dict[int, float]] = field(default_factory=dict)  # arm → seed → value at budget end
    miss: str = ""  # a FAIL outside an acceptance band: "exceeds the claim" or "falls short of the claim"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("statistic", "ci", "band"):
            out[key] = json_safe(out[key])
        out["points"] = {str(k): v for k, v in self.points.items()}
        for key in ("per_seed", "censored"):
            out[key] = {a: {str(k): json_safe(v) for k, v in d.items()} for a, d in getattr(self, key).items()}
        return out


class _Inconclusive(Exception):
    """Raised while gathering evidence; becomes an INCONCLUSIVE verdict with this reason."""

    def __init__(self, reason: str, verdict: VerdictKind = "INCONCLUSIVE") -> None:
        super().__init__(reason)
        self.reason = reason
        self.verdict = verdict


# ---------------------------------------------------------------- selecting runs


def _same(logged: Any, wanted: Any) -> bool:
    if logged is None or (isinstance(logged, float) and math.isnan(logged)):
        return False
    if str(logged) == str(wanted):
        return True
    try:
        return math.isclose(float(logged), float(wanted))
    except (TypeError, ValueError):
        return False


def select_arm(runs: pd.DataFrame, spec: PaperSpec, name: str, profile: str | None, scale: str | None) -> pd.DataFrame:
    """Rows of ``runs`` that belong to arm ``name`` on ``profile`` (any profile if ``None``)."""
    arm = spec.arm(name)
    mask = runs["method"] == arm.method
    if profile is not None:
        mask &= runs["profile"] == profile
    if scale is not None and "scale" in runs:  # runs that do not record a scale are taken as the claim's
        mask &= runs["scale"].fillna(scale).replace("", scale) == scale
    if arm.campaign is not None:
        mask &= runs.get("campaign", pd.Series(None, index=runs.index)) == arm.campaign
    for key, wanted in (flatten_params({"method_params": arm.params}) if arm.params else {}).items():
        col = f"params.{key}"
        mask &= runs[col].map(lambda x, w=wanted: _same(x, w)) if col in runs else False
    return runs[mask]


def latest_per_seed(rows: pd.DataFrame) -> tuple[pd.DataFrame, dict[int, str]]:
    """Per seed the newest FINISHED run (indexed by seed), and the status of seeds with none."""
    order = rows.sort_values("start_time", kind="stable") if "start_time" in rows else rows
    picked, bad = [], {}
    for seed, group in order.groupby("seed", sort=True):
        done = group[group["status"] == "FINISHED"]
        if len(done):
            picked.append(done.iloc[-1])
        else:
            bad[int(seed)] = str(group["status"].iloc[-1])
    frame = pd.DataFrame(picked).set_index("seed", drop=False) if picked else rows.iloc[0:0]
    return frame, bad


# ---------------------------------------------------------------- per-seed values


def metric_column(runs: pd.DataFrame, metric: str) -> str | None:
    """``metric`` if the table has it, else ``final/<metric>`` (so ``val_accuracy`` means the final one)."""
    for col in (metric, f"final/{metric}"):
        if col in runs.columns:
            return col
    return None


def crossing(curve: pd.DataFrame, metric: str, value: float, direction: str, unit_col: str) -> tuple[float, bool]:
    """``(unit value at the first evaluation meeting the target, True)``; else ``(last unit value, False)``."""
    curve = curve.sort_values("step")
    hit = curve[metric] >= value if direction == "max" else curve[metric] <= value
    if hit.any():
        return float(curve.loc[hit.idxmax(), unit_col]), True
    return float(curve[unit_col].max()), False


def _seed_values(
    claim: Any, rows: pd.DataFrame, curves: pd.DataFrame | None, metric: str | None
) -> tuple[dict[int, float], dict[int, float], list[int]]:
    """``(values, censored, missing)`` per seed: reached values, lower bounds of unreached ones, seeds without data."""
    values: dict[int, float] = {}
    censored: dict[int, float] = {}
    missing: list[int] = []
    target = getattr(claim, "target", None)
    if target is not None:  # read the curves: convergence, or speedup to an explicit target
        unit_col = UNIT_COLUMN[getattr(claim, "unit", None) or claim.clock]
        for seed, row in rows.iterrows():
            curve = None if curves is None else curves[curves["run_id"] == row["run_id"]]
            if curve is None or curve.empty or target.metric not in curve or unit_col not in curve:
                missing.append(int(seed))
                continue
            curve = curve.dropna(subset=[target.metric, unit_col])
            if curve.empty:
                missing.append(int(seed))
                continue
            v, ok = crossing(curve, target.metric, target.value, target.direction, unit_col)
            (values if ok else censored)[int(seed)] = v
        return values, censored, missing
    col = metric_column(rows, metric) if metric else None
    for seed, row in rows.iterrows():
        v = row.get(col) if col else None
        reached = row.get("target_reached")
        if col in _TARGET_SUMMARIES and reached is not None and not pd.isna(reached) and float(reached) == 0:
            censored[int(seed)] = math.inf
        elif v is None or pd.isna(v):
            missing.append(int(seed))
        else:
            values[int(seed)] = float(v)
    return values, censored, missing


def _claim_metric(claim: Any) -> str | None:
    if claim.kind == "speedup" and claim.target is None:
        if claim.measure == "time_to_target":
            return "time_to_target_s"
        return "final/emulated_s" if claim.clock == "emulated" else "final/wall_s"
    return getattr(claim, "metric", None)


def _relative(form: str, direction: str) -> Callable[[Any, Any], Any]:
    if form == "ratio":
        return (lambda a, b: a / b) if direction == "max" else (lambda a, b: b / a)
    return (lambda a, b: a / b - 1) if direction == "max" else (lambda a, b: 1 - a / b)


_STAT_LABEL = {"median": "median", "mean": "mean", "geometric_mean": "geometric mean", "olympic_mean": "olympic mean"}


# ---------------------------------------------------------------- the engine


def evaluate_claim(
    claim: Claim, spec: PaperSpec, runs: pd.DataFrame, curves: pd.DataFrame | None = None, paper_id: str = ""
) -> Verdict:
    """Judge one claim (already resolved by :func:`suite.claims.schema.validate_paper`)."""
    verdict = Verdict(claim.id, claim.kind, "INCONCLUSIVE", "")
    try:
        return _evaluate(claim, spec, runs, curves, paper_id or spec.citation.id, verdict)
    except _Inconclusive as exc:  # keep whatever per-seed values were gathered: they explain the reason
        verdict.verdict, verdict.reason = exc.verdict, exc.reason
        return verdict


def evaluate_claims(
    spec: PaperSpec, runs: pd.DataFrame, curves: pd.DataFrame | None = None, paper_id: str = ""
) -> list[Verdict]:
    return [evaluate_claim(c, spec, runs, curves, paper_id) for c in spec.claims]


def _gather(claim: Any, spec: PaperSpec, runs: pd.DataFrame, name: str) -> pd.DataFrame:
    rows = select_arm(runs, spec, name, claim.profile, claim.scale)
    where = f" on profile {claim.profile!r}" if claim.profile else ""
    if rows.empty:
        raise _Inconclusive(f"arm missing: no runs of '{name}' (method {spec.arm(name).method}){where}")
    if claim.profile is None and rows["profile"].nunique() > 1:
        profiles = ", ".join(sorted(rows["profile"].unique()))
        raise _Inconclusive(f"arm '{name}' ran on several profiles ({profiles}); set the claim's profile")
    done, bad = latest_per_seed(rows)
    if done.empty:
        detail = ", ".join(f"seed {s} {st}" for s, st in sorted(bad.items()))
        raise _Inconclusive(f"arm failed: no finished run of '{name}'{where} ({detail})")
    return done


def _evaluate(
    claim: Any, spec: PaperSpec, runs: pd.DataFrame, curves: pd.DataFrame | None, paper: str, verdict: Verdict
) -> Verdict:
    acc = claim.accept
    names = list(claim.arms) if claim.kind == "ordering" else [claim.arm]
    if hasattr(claim, "baseline"):
        names.append(claim.baseline)
    metric = _claim_metric(claim)
    arms: dict[str, dict[int, float]] = {}
    censored_all: dict[str, dict[int, float]] = {}
    for name in names:
        done = _gather(claim, spec, runs, name)
        from_summary = metric is not None and getattr(claim, "target", None) is None
        if from_summary and metric_column(done, metric) is None:  # type: ignore[arg-type]
            raise _Inconclusive(f"metric '{metric}' was not logged by arm '{name}'")
        values, censored, missing = _seed_values(claim, done, curves, metric)
        if not values and not censored:
            raise _Inconclusive(f"no usable value of '{metric or 'target'}' in arm '{name}' (seeds {missing})")
        arms[name], censored_all[name] = values, censored
        verdict.per_seed[name] = dict(values)
        if censored:
            verdict.censored[name] = dict(censored)
    need = acc.min_seeds if acc.statistic != "olympic_mean" else max(acc.min_seeds, 3)
    seed_key = derive_seed("claims", paper, claim.id)

    unreached = {n: sorted(c) for n, c in censored_all.items() if c}
    if unreached:
        text = "; ".join(f"'{n}' seeds {s}" for n, s in unreached.items())
        if claim.kind == "convergence":
            return _censored_convergence(claim, verdict, arms[claim.arm], censored_all[claim.arm], need, text)
        raise _Inconclusive(f"target never reached within the budget ({text})")

    label = _STAT_LABEL[acc.statistic]
    if claim.kind in ("speedup", "relative_improvement", "non_inferiority") and acc.paired:
        a, b = arms[claim.arm], arms[claim.baseline]
        common = sorted(set(a) & set(b))
        if len(common) < need:
            raise _Inconclusive(
                f"too few seeds: {len(common)} with both '{claim.arm}' and '{claim.baseline}' finished "
                f"(seeds {common}), {need} required"
            )
        av, bv = np.array([a[s] for s in common]), np.array([b[s] for s in common])
        if claim.kind == "speedup":
            derived, verdict.unit = bv / av, "x"
        elif claim.kind == "relative_improvement":
            derived = _relative(claim.form, claim.direction)(av, bv)
            verdict.unit = "x" if claim.form == "ratio" else "fraction"
        else:
            derived, verdict.unit = (av - bv) * (1 if claim.direction == "max" else -1), claim.metric
        verdict.points = dict(zip(common, derived.tolist(), strict=True))
        samples: list[np.ndarray] = [derived]

        def combine(s: list[np.ndarray]) -> Any:
            return stat(s[0], acc.statistic)

        verdict.statistic_name = f"{label} of per-seed {'ratios' if verdict.unit == 'x' else 'values'} (paired)"
    else:
        for name in names:
            if len(arms[name]) < need:
                usable = sorted(arms[name])
                raise _Inconclusive(
                    f"too few seeds: '{name}' has {len(usable)} usable (seeds {usable}), {need} required"
                )
        samples = [np.array(list(arms[n].values())) for n in names]
        combine, verdict.unit = _unpaired(claim, acc.statistic)
        verdict.statistic_name = label if len(names) == 1 else f"from per-arm {label}s (unpaired)"
        if len(names) == 1:
            verdict.points = dict(arms[names[0]])
    verdict.n_seeds = min(len(s) for s in samples)
    point, ci = bootstrap(samples, combine, seed_key, acc.n_boot, acc.ci)
    if not math.isfinite(point):
        raise _Inconclusive(f"the {label} is undefined for these values (non-positive values for a ratio?)")
    verdict.statistic, verdict.ci = point, ci
    return _decide(claim, verdict, arms)


def _unpaired(claim: Any, name: str) -> tuple[Callable[[list[np.ndarray]], Any], str]:
    if claim.kind == "speedup":
        return (lambda s: stat(s[1], name) / stat(s[0], name)), "x"
    if claim.kind == "relative_improvement":
        f = _relative(claim.form, claim.direction)
        return (lambda s: f(stat(s[0], name), stat(s[1], name))), ("x" if claim.form == "ratio" else "fraction")
    if claim.kind == "non_inferiority":
        sign = 1 if claim.direction == "max" else -1
        return (lambda s: sign * (stat(s[0], name) - stat(s[1], name))), claim.metric
    if claim.kind == "ordering":
        sign = 1 if claim.direction == "max" else -1

        def gaps(s: list[np.ndarray]) -> Any:
            per_arm = [stat(x, name) for x in s]
            return np.min(np.stack([sign * (p - q) for p, q in itertools.pairwise(per_arm)]), axis=0)

        return gaps, claim.metric
    unit = claim.unit if claim.kind == "convergence" else claim.metric
    return (lambda s: stat(s[0], name)), unit


def _higher_is_better(claim: Any) -> bool:
    if claim.kind == "final_metric":
        return claim.direction == "max"
    return claim.kind != "convergence"


def _miss(above: bool, claim: Any) -> str:
    """Which way a result outside the band missed, in the paper's terms: a time cut of 95% against a
    claimed 72% is a FAIL of the claim as stated, but in the paper's favour, and the reader must see that."""
    return "exceeds the claim" if above == _higher_is_better(claim) else "falls short of the claim"


def _decide(claim: Any, v: Verdict, arms: dict[str, dict[int, float]]) -> Verdict:
    assert v.statistic is not None and v.ci is not None
    s, (lo, hi) = v.statistic, v.ci
    ci_text = f"{fmt(s, v.unit)} [{fmt(lo, v.unit)}, {fmt(hi, v.unit)}], n={v.n_seeds}"
    if claim.kind == "non_inferiority":
        base = np.array(list(arms[claim.baseline].values()))
        margin = claim.margin * (abs(float(stat(base, claim.accept.statistic))) if claim.margin_kind == "rel" else 1)
        v.band = (-margin, math.inf)
        if lo >= -margin:
            v.verdict, v.reason = "PASS", f"difference {ci_text}: CI lower bound ≥ −{fmt(margin)}"
        elif s < -margin:
            v.verdict, v.reason = "FAIL", f"difference {ci_text} is below the margin −{fmt(margin)}"
        else:
            v.reason = f"difference {ci_text}: CI reaches below −{fmt(margin)}; more seeds needed to show it"
        return v
    if claim.kind == "ordering":
        v.band = (claim.margin, math.inf)
        medians = {n: float(np.median(list(d.values()))) for n, d in arms.items()}
        ranked = sorted(medians, key=medians.__getitem__, reverse=claim.direction == "max")
        observed = (" > " if claim.direction == "max" else " < ").join(f"{n} ({fmt(medians[n])})" for n in ranked)
        lower, upper = (lo, hi) if claim.accept.rule == "ci" else (s, s)
        if lower > claim.margin:
            v.verdict, v.reason = "PASS", f"smallest adjacent gap {ci_text} > {fmt(claim.margin)}; observed {observed}"
        elif upper <= claim.margin:
            v.verdict, v.reason = "FAIL", f"smallest adjacent gap {ci_text} ≤ {fmt(claim.margin)}; observed {observed}"
        else:
            v.reason = f"smallest adjacent gap {ci_text}: CI straddles {fmt(claim.margin)}; more seeds needed"
        return v
    band = acceptance_band(claim, _higher_is_better(claim))
    assert band is not None
    v.band = band
    a, b = band
    band_text = f"[{fmt(a, v.unit)}, {fmt(b, v.unit)}]"
    if claim.accept.rule == "point":
        inside = a <= s <= b
        v.verdict = "PASS" if inside else "FAIL"
        v.reason = f"{v.statistic_name} {ci_text} {'inside' if inside else 'outside'} the acceptance band {band_text}"
        if not inside:
            v.miss = _miss(s > b, claim)
            v.reason += f": {v.miss}"
    elif a <= lo and hi <= b:
        v.verdict, v.reason = "PASS", f"CI of {ci_text} inside the acceptance band {band_text}"
    elif hi < a or lo > b:
        v.verdict, v.miss = "FAIL", _miss(lo > b, claim)
        v.reason = f"CI of {ci_text} entirely outside the acceptance band {band_text}: {v.miss}"
    else:
        v.reason = f"CI of {ci_text} straddles the acceptance band {band_text}; more seeds needed"
    return v


def _censored_convergence(
    claim: Any, v: Verdict, reached: dict[int, float], censored: dict[int, float], need: int, text: str
) -> Verdict:
    """Unreached seeds are lower bounds; every statistic here is monotone, so a lower-bound
    statistic already past the band's upper edge proves the claim false."""
    values = {**reached, **censored}
    band = acceptance_band(claim, higher_is_better=False)
    assert band is not None
    v.band, v.unit, v.n_seeds = band, claim.unit, len(values)
    v.points = values
    if len(values) >= need:
        bound = float(stat(np.array(list(values.values())), claim.accept.statistic))
        if bound > band[1]:
            v.verdict, v.statistic, v.miss = "FAIL", bound, "falls short of the claim"
            v.statistic_name = f"lower bound of the {_STAT_LABEL[claim.accept.statistic]}"
            v.reason = (
                f"target never reached within the budget ({text}); even counting those seeds at their "
                f"budget, the {_STAT_LABEL[claim.accept.statistic]} is ≥ {fmt(bound)} {claim.unit} > {fmt(band[1])}: "
                f"{v.miss}"
            )
            return v
    v.reason = f"target never reached within the budget ({text})"
    return v
