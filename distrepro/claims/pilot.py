"""Choosing n before the confirmatory runs, from a pilot's spread on seeds that are then discarded.

``distrepro preregister PAPER --scale S --pilot`` reads the paper's runs at that scale on *exploratory* seeds
(below :data:`~distrepro.claims.preregistration.CONFIRMATORY_FIRST_SEED`, 100): they are the pilot. For each claim
judged at the scale it takes the per-seed values the verdict would read (paired by seed, on the interval's own
scale: logs for ratios and geometric means, log-ratios for a fraction judged through its ratio;
:mod:`distrepro.claims.samples`), their standard deviation ``s``, and a distance ``d`` to plan for, then the
smallest n with ``(t_{n−1, 1−α} + t_{n−1, power})·s/√n < d`` (:func:`distrepro.claims.planning.seeds_for_power`).
The confirmatory n is the largest over the headline claims, capped; the pilot's seeds are never confirmatory (the
confirmatory seeds start at 100), so the pilot decides nothing.

Which ``d``, said per claim:

* the claim's **smallest effect of interest** where it defines one: a claimed value and its tolerance (the band's
  edge lies that far from the claimed value, so a true effect equal to the paper's is cleared with the planned
  power), or a non-inferiority margin (planned at a true difference of 0, the usual non-inferiority plan);
* otherwise (an ordering, or a claimed value that is itself the band's edge, e.g. a one-sided "ratio > 1") there is
  no effect size in the claim. The pilot's own observed distance is then *not* used as the effect: planning on a
  pilot's observed effect under-powers the follow-up (Albers & Lakens, J. Exp. Soc. Psychol. 74:187-195, 2018).
  The plan uses the *safeguard* distance instead, the lower end of the pilot distance's one-sided 80 % confidence
  bound (Perugini, Gallucci & Costantini, Perspect. Psychol. Sci. 9(3):319-332, 2014, who use the lower limit of a
  60 % two-sided interval); if that bound does not clear the edge, the pilot gives no effect to plan for.

A band with two finite edges is planned at power ``1 − (1 − power)/2`` per edge, so that both are cleared with the
planned power (a union bound). The spread of a bootstrap or sign-flip interval's claim is read through the same t
approximation, like :mod:`distrepro.claims.planning`'s other figures.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from distrepro.claims.acceptance import MIN_SEEDS_POINT_OR_BOOTSTRAP, acceptance_band, claimed_bounds
from distrepro.claims.decide import higher_is_better
from distrepro.claims.evidence import group_of
from distrepro.claims.gather import claim_metric, latest_per_seed, seed_values, select_arm
from distrepro.claims.intervals import t_quantile
from distrepro.claims.planning import seeds_for_power
from distrepro.claims.preregistration import CONFIRMATORY_FIRST_SEED
from distrepro.claims.samples import interval_scale, paired_sample
from distrepro.claims.stats import stat
from distrepro.claims.verdict_record import Verdict
from distrepro.config.run_config import index_spans
from distrepro.errors import ConfigError, DistreproError

DEFAULT_POWER = 0.8
DEFAULT_MAX_SEEDS = 30
#: the safeguard distance: the lower end of a one-sided 80 % bound (Perugini et al. 2014's 60 % two-sided interval)
SAFEGUARD_LEVEL = 0.6
RULE = (
    "per claim, the smallest n with (t_{n-1,1-alpha} + t_{n-1,power}) * s / sqrt(n) < d, s the pilot's per-seed "
    "spread on the interval's scale, d the claim's smallest effect of interest (else the pilot's safeguard "
    "distance); n = the largest over the headline claims within max_seeds, at least the claims' min_seeds"
)
NOT_RESOLVABLE = "not resolvable by seeds at this scale"
SAFEGUARD = "the claim sets no effect size: the pilot's safeguard distance, its 80 % lower bound"


class NoPilotError(DistreproError):
    """``--pilot`` found no exploratory runs to plan from."""


@dataclass(frozen=True)
class ClaimPlan:
    """One claim's plan: the pilot's spread ``s``, the distance ``d`` and the seeds ``n`` they need."""

    claim_id: str
    headline: bool
    status: str  # "planned", NOT_RESOLVABLE, or "not planned: <why>"
    pilot_seeds: int = 0
    s: float | None = None
    d: float | None = None
    d_from: str = ""
    on: str = "value"  # the interval's scale: "value" or "log"
    n: int | None = None
    power_per_edge: float | None = None
    alpha: float | None = None  # one-sided, (1 − ci)/2 of the claim's interval: 2.5 % for 95 %


@dataclass
class PilotPlan:
    """The plan of one paper at one scale, and what the record's ``pilot:`` block keeps of it."""

    seeds: list[int]
    campaigns: list[str]
    power: float
    max_seeds: int
    n: int
    n_from: str
    claims: list[ClaimPlan] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        def entry(c: ClaimPlan) -> dict[str, Any]:
            kept = {k: v for k, v in asdict(c).items() if v is not None and k != "claim_id"}
            for key in ("s", "d", "power_per_edge"):
                if key in kept:
                    kept[key] = float(f"{kept[key]:.6g}")
            return kept

        return {
            "seeds": list(self.seeds),
            "campaigns": list(self.campaigns),
            "power": self.power,
            "max_seeds": self.max_seeds,
            "rule": RULE,
            "n": self.n,
            "n_from": self.n_from,
            "claims": {c.claim_id: entry(c) for c in self.claims},
        }


def claim_line(claim_id: str, entry: dict[str, Any], max_seeds: int) -> str:
    """One claim of a record's ``pilot:`` block, as the CLI and the report print it."""
    head = f"`{claim_id}`{'' if entry.get('headline') else ' (not headline: does not set n)'}"
    if entry.get("s") is None or entry.get("d") is None:
        return f"{head}: {entry.get('status', '?')}"
    what = (
        f"s = {entry['s']:.4g} on the {entry.get('on', 'value')} scale ({entry.get('pilot_seeds')} pilot seeds), "
        f"d = {entry['d']:.4g} ({entry.get('d_from', '?')})"
    )
    if entry.get("status") == NOT_RESOLVABLE:
        return f"{head}: {what}; needs more than {max_seeds} seeds: {NOT_RESOLVABLE}"
    return f"{head}: {what}; needs {entry.get('n')} seeds"


def summary_line(block: dict[str, Any]) -> str:
    """The record's ``pilot:`` block in one sentence: seeds, power, the n chosen and why."""
    span = index_spans(block.get("seeds") or []) or "none"
    campaigns = block.get("campaigns") or []
    where = f", campaign(s) {', '.join(c[:12] for c in campaigns)}" if 0 < len(campaigns) <= 3 else ""
    where = f", {len(campaigns)} campaigns" if len(campaigns) > 3 else where
    return (
        f"A pilot on seeds {span}{where} (discarded from confirmation) planned the seeds for "
        f"{100 * float(block.get('power', DEFAULT_POWER)):.0f} % power at the one-sided 2.5 % of a 95 % interval: "
        f"n = {block.get('n')}, {block.get('n_from')} (cap {block.get('max_seeds')} seeds)"
    )


# ---------------------------------------------------------------- the pilot's per-seed values


def _arm_values(claim: Any, spec: Any, runs: pd.DataFrame, curves: pd.DataFrame | None, name: str) -> dict[int, float]:
    rows = select_arm(runs, spec, name, claim.profile, claim.scale)
    if rows.empty:
        return {}
    done, _ = latest_per_seed(rows)
    values, _, _ = seed_values(claim, done, curves, claim_metric(claim)) if not done.empty else ({}, {}, [])
    return values  # censored seeds (target not reached) have no value to take a spread of


def _names(claim: Any) -> list[str]:
    names = list(claim.arms) if claim.kind == "ordering" else [claim.arm]
    return [*names, claim.baseline] if hasattr(claim, "baseline") else names


def pilot_values(
    claim: Any, spec: Any, runs: pd.DataFrame, curves: pd.DataFrame | None
) -> tuple[dict[str, dict[int, float]], dict[int, float], str | None]:
    """``(per-arm values, per-seed values the verdict reads, why none)``: paired by seed where the claim is."""
    names = _names(claim)
    arms = {n: _arm_values(claim, spec, runs, curves, n) for n in names}
    empty = [n for n in names if not arms[n]]
    if empty:
        return arms, {}, f"no finished pilot run with a value of arm(s) {', '.join(empty)}"
    if len(names) == 1:
        return arms, dict(arms[names[0]]), None
    if not claim.accept.paired:
        return arms, {}, "an unpaired comparison has no per-seed values to take a spread of"
    common = sorted(set.intersection(*(set(arms[n]) for n in names)))
    if not common:
        return arms, {}, "no pilot seed on which every arm finished"
    v = Verdict(claim.id, claim.kind, "INCONCLUSIVE", "")
    paired_sample(claim, arms, names, common, v)
    return arms, dict(v.points), None


# ---------------------------------------------------------------- the distance to plan for


@dataclass(frozen=True)
class _Edge:
    """A finite edge the interval must clear to PASS, on the claim's own scale."""

    edge: float
    above: bool  # PASS lies above the edge (a lower edge)
    d: float | None  # the claim's smallest effect of interest: distance from the claimed value, on the interval's scale
    d_from: str


def _sesoi_edges(claim: Any, arms: dict[str, dict[int, float]]) -> list[_Edge]:
    """Each finite edge a PASS must clear, with the distance the claim itself sets (None where it sets none)."""
    scale = interval_scale(claim)
    if claim.kind == "non_inferiority":
        base = np.array(list(arms[claim.baseline].values()))
        rel = claim.margin_kind == "rel"
        margin = claim.margin * (abs(float(stat(base, claim.accept.statistic))) if rel else 1.0)
        src = "the non-inferiority margin" + (" (relative, at the pilot baseline's level)" if rel else "")
        return [_Edge(-margin, True, margin if margin > 0 else None, f"{src}, true difference 0")]
    if claim.kind == "ordering":
        return [_Edge(claim.margin, True, None, "")]
    band = acceptance_band(claim, higher_is_better(claim))
    bounds = claimed_bounds(getattr(claim, "claimed", None))
    assert band is not None and bounds is not None
    out = []
    with np.errstate(divide="ignore", invalid="ignore"):
        for edge, claimed, above in ((band[0], bounds[0], True), (band[1], bounds[1], False)):
            if math.isfinite(edge):
                d = (scale(claimed) - scale(edge)) * (1 if above else -1)
                ok = math.isfinite(d) and d > 0
                out.append(_Edge(edge, above, d if ok else None, "the tolerance around the claimed value"))
    return out


def _safeguard(claim: Any, values: np.ndarray, edge: _Edge) -> float:
    """The lower end of the one-sided 80 % bound on the pilot's distance to ``edge``, towards the PASS side."""
    with np.errstate(divide="ignore", invalid="ignore"):
        observed = float(np.mean(values)) - interval_scale(claim)(edge.edge)
    distance = observed if edge.above else -observed
    half = t_quantile(SAFEGUARD_LEVEL, values.size - 1) * float(np.std(values, ddof=1)) / math.sqrt(values.size)
    return distance - half


# ---------------------------------------------------------------- per claim, then the paper


def _floor(claim: Any, min_seeds: int) -> int:
    """The fewest seeds the claim's rule judges at all (its min_seeds; 10 for a point rule or a bootstrap)."""
    floor = claim.accept.min_seeds or min_seeds
    if claim.accept.rule == "point" or claim.accept.ci_method in ("bca", "percentile"):
        floor = max(floor, MIN_SEEDS_POINT_OR_BOOTSTRAP)
    return int(max(floor, 2))


def plan_claim(
    claim: Any, spec: Any, runs: pd.DataFrame, curves: pd.DataFrame | None, power: float, max_seeds: int
) -> ClaimPlan:
    """The seeds ``claim`` needs for ``power``, from the pilot ``runs`` (already restricted to pilot seeds)."""
    headline = group_of(claim) == "headline"
    if claim.decided_by == "model_structure":
        return ClaimPlan(claim.id, headline, "not planned: decided by the model's structure (no spread)")
    arms, points, why = pilot_values(claim, spec, runs, curves)
    scale = interval_scale(claim)
    with np.errstate(divide="ignore", invalid="ignore"):
        values = np.array([scale(x) for x in points.values()], dtype=float)
    if why is None and (values.size < 2 or not np.all(np.isfinite(values))):
        why = "fewer than 2 pilot seeds with a finite value on the interval's scale"
    if why is not None:
        return ClaimPlan(claim.id, headline, f"not planned: {why}", pilot_seeds=len(points))
    on = "log" if scale is not float else "value"
    s = float(np.std(values, ddof=1))
    edges = _sesoi_edges(claim, arms)
    per_edge = 1 - (1 - power) / len(edges)  # two edges: each at half the miss rate, so both clear with `power`
    alpha = (1 - claim.accept.ci) / 2
    needed, ds, froms = [], [], []
    for edge in edges:
        d, d_from = edge.d, edge.d_from
        if d is None:  # no effect size in the claim: the safeguard distance, never the pilot's observed one
            d, d_from = _safeguard(claim, values, edge), SAFEGUARD
            if not d > 0:
                why = (
                    "not planned: the claim sets no effect size, and the pilot's safeguard distance (its 80 % lower "
                    "bound) does not clear the edge: the pilot shows no effect to plan for"
                )
                return ClaimPlan(claim.id, headline, why, len(points), s, None, "", on)
        ds.append(d)
        froms.append(d_from)
        needed.append(seeds_for_power(s, d, per_edge, alpha))
    k = int(np.argmin(ds))
    plan = ClaimPlan(
        claim.id, headline, "planned", len(points), s, ds[k], froms[k], on, None, round(per_edge, 4), round(alpha, 6)
    )
    if any(n is None or n > max_seeds for n in needed):
        return dataclasses.replace(plan, status=NOT_RESOLVABLE)
    return dataclasses.replace(plan, n=max(max(n for n in needed if n), _floor(claim, spec.setup.min_seeds)))


def plan_scale(
    spec_at_scale: Any,
    scale: str,
    runs: pd.DataFrame,
    curves: pd.DataFrame | None,
    power: float = DEFAULT_POWER,
    max_seeds: int = DEFAULT_MAX_SEEDS,
    fallback_n: int | None = None,
) -> PilotPlan:
    """Every claim judged at ``scale`` planned from the pilot ``runs``; n = the largest over the planned headline
    claims (``fallback_n``, else the setup's min_seeds, when none is)."""
    claims = [c for c in spec_at_scale.claims if c.scale == scale]
    plans = [plan_claim(c, spec_at_scale, runs, curves, power, max_seeds) for c in claims]
    read = [select_arm(runs, spec_at_scale, a, c.profile, c.scale) for c in claims for a in _names(c)]
    used = pd.concat(read) if read else runs.iloc[0:0]
    used = used[used["status"] == "FINISHED"] if "status" in used else used
    seeds = sorted({int(s) for s in used["seed"]}) if "seed" in used else []
    campaigns = sorted({str(p) for p in used.get("parent_run_id", pd.Series(dtype=object)).dropna()})
    setting = [p.n for p in plans if p.headline and p.n is not None]
    floor = int(spec_at_scale.setup.min_seeds)
    if setting:
        n, n_from = max(floor, *setting), "the largest over the planned headline claims"
    else:
        n = max(floor, fallback_n or floor)
        n_from = "as many as the arms' configs run: no headline claim was planned"
    return PilotPlan(seeds, campaigns, power, max_seeds, n, n_from, plans)


def pilot_runs(runs: pd.DataFrame, wanted: Sequence[int] | None = None) -> pd.DataFrame:
    """The runs on exploratory seeds (0 ≤ seed < 100), of the ``wanted`` seeds only if given."""
    seeds = runs["seed"].astype(int)
    keep = (seeds >= 0) & (seeds < CONFIRMATORY_FIRST_SEED)
    if wanted is not None:
        keep &= seeds.isin(list(wanted))
    return runs[keep]


def no_pilot(paper: str, scale: str, where: str) -> NoPilotError:
    """The one-line error of ``--pilot`` without a pilot in the store."""
    return NoPilotError(
        f"preregister --pilot: no runs of {paper} at {scale} scale on seeds below {CONFIRMATORY_FIRST_SEED} "
        f"({where}); run e.g. `distrepro reproduce {paper} --scale {scale} --seeds 0-4` first"
    )


@dataclass(frozen=True)
class PilotRequest:
    """``--pilot`` and its options: what :func:`distrepro.claims.preregistration.preregister` calls to plan n."""

    campaigns: list[str] | None = None
    seeds: list[int] | None = None
    power: float = DEFAULT_POWER
    max_seeds: int = DEFAULT_MAX_SEEDS
    tracking_uri: str | None = None

    def __post_init__(self) -> None:
        late = [s for s in self.seeds or [] if not 0 <= s < CONFIRMATORY_FIRST_SEED]
        if late:
            raise ConfigError(
                "--pilot-seeds", None, f"a pilot runs on exploratory seeds 0-{CONFIRMATORY_FIRST_SEED - 1}, not {late}"
            )
        if not 0.5 <= self.power < 1:
            raise ConfigError("--power", None, f"must be in [0.5, 1), got {self.power}")
        if self.max_seeds < 2:
            raise ConfigError("--max-seeds", None, f"must be at least 2, got {self.max_seeds}")

    def __call__(self, paper: str, spec_at_scale: Any, scale: str, fallback_n: int) -> dict[str, Any]:
        """Read the pilot from the store and plan; the record's ``pilot:`` block."""
        from distrepro.claims.runs import ReportError, load_runs

        claims = [c for c in spec_at_scale.claims if c.scale == scale]
        targets = [t.metric for c in claims if (t := getattr(c, "target", None)) is not None]
        try:
            rs = load_runs(paper, self.campaigns, self.tracking_uri, extra_curve_keys=targets)
        except ReportError as exc:
            raise no_pilot(paper, scale, str(exc).split(";")[0]) from exc
        runs = pilot_runs(rs.runs, self.seeds)
        arms = {a for c in claims for a in _names(c)}
        if not any(not select_arm(runs, spec_at_scale, a, None, scale).empty for a in arms):
            seeds = f"seeds {self.seeds}" if self.seeds else "any exploratory seed"
            raise no_pilot(
                paper, scale, f"none of the {len(arms)} arms judged there ran on {seeds} in {rs.tracking_uri}"
            )
        plan = plan_scale(spec_at_scale, scale, runs, rs.curves, self.power, self.max_seeds, fallback_n)
        return plan.record()
