"""Every timing claim judged over the plausible hardware: PASS share, tornado, flip points, heat map.

For each setting the runs are re-timed (:mod:`.retime`) and each timing claim is judged by
:func:`distrepro.claims.verdicts.evaluate_claim` on the re-timed tables, so a verdict at a setting is
exactly the verdict the report would give had the runs been made on that hardware (training math
unchanged). Designs:

* a Latin hypercube of ``samples`` settings over all variables: the share of plausible settings in
  which each claim PASSes, and a rank correlation of each variable with the claim's statistic;
* one-at-a-time scans (others central) of ``points`` values per variable: the tornado (the
  statistic at each range end) and flip points, refined by bisection between scan values whose
  verdicts differ (``bisect`` halvings, i.e. to 1/2^bisect of the scan step);
* for a claim whose verdict is not the same everywhere, a grid over its two most influential
  variables (the widest tornado bars), others central: the heat map.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from distrepro.claims.schema import PaperSpec
from distrepro.claims.verdicts import evaluate_claim
from distrepro.orchestration.progress import NoPhases, Phases, counted
from distrepro.seeding import derive_seed
from distrepro.sensitivity.columns import needed_columns
from distrepro.sensitivity.retime import Retimer
from distrepro.sensitivity.space import Space, latin_hypercube, oat_quantiles


@dataclass(frozen=True)
class Point:
    verdict: str
    statistic: float


@dataclass(frozen=True)
class Flip:
    """Along one variable (others central) the verdict is ``below`` under ``value`` and ``above`` over it (a
    categorical variable: ``above`` at the choice of index ``value``, ``below`` at the choice listed before it)."""

    variable: str
    value: float
    below: str
    above: str


@dataclass(frozen=True)
class Bar:
    """Tornado bar: the claim's statistic and verdict at the low and the high end of one variable."""

    variable: str
    low: Point
    high: Point

    @property
    def span(self) -> float:
        d = abs(self.high.statistic - self.low.statistic)
        return d if math.isfinite(d) else 0.0


@dataclass
class Heat:
    x: str
    y: str
    xs: list[float]
    ys: list[float]
    statistic: list[list[float]]  # [row = y][col = x]
    verdict: list[list[str]]


@dataclass
class ClaimSensitivity:
    claim_id: str
    statement: str
    unit: str
    band: tuple[float, float] | None
    central: Point
    variables: list[str]
    lhs: list[Point] = field(default_factory=list)
    oat: dict[str, list[tuple[float, Point]]] = field(default_factory=dict)
    tornado: list[Bar] = field(default_factory=list)
    flips: list[Flip] = field(default_factory=list)
    rank_corr: dict[str, float] = field(default_factory=dict)
    heat: Heat | None = None

    def share(self, verdict: str) -> float:
        return sum(p.verdict == verdict for p in self.lhs) / len(self.lhs) if self.lhs else math.nan

    def stat_quantiles(self, qs: Sequence[float] = (0.05, 0.5, 0.95)) -> list[float]:
        vals = np.array([p.statistic for p in self.lhs], dtype=float)
        vals = vals[np.isfinite(vals)]
        return [float(np.quantile(vals, q)) for q in qs] if vals.size else [math.nan] * len(qs)

    def decisive(self) -> str | None:
        """The variable that matters most: the widest tornado bar among those with a flip point, else
        the widest bar; None when no variable moves the statistic."""
        flipping = {f.variable for f in self.flips}
        bars = [b for b in self.tornado if b.variable in flipping] or [b for b in self.tornado if b.span > 0]
        return bars[0].variable if bars else None


@dataclass
class SensitivityResult:
    paper: str
    samples: int
    seed: int
    space: Space
    quantiles: np.ndarray  # LHS design, (samples, variables)
    claims: list[ClaimSensitivity]
    skipped: dict[str, str]
    validation: list[dict[str, Any]]
    unranged: dict[str, list[str]]
    simulations: int = 0
    wall_s: float = 0.0

    def samples_frame(self) -> pd.DataFrame:
        """One row per LHS setting: variable values, then per claim its statistic and verdict."""
        frame = pd.DataFrame(
            {
                v.name: [v.describe(v.at(q)) if v.choices else v.at(q) for q in self.quantiles[:, j]]
                for j, v in enumerate(self.space.variables)
            }
        )
        for c in self.claims:
            frame[f"{c.claim_id}:statistic"] = [p.statistic for p in c.lhs]
            frame[f"{c.claim_id}:verdict"] = [p.verdict for p in c.lhs]
        return frame

    def max_validation_error(self) -> float:
        errs = [r["rel_error"] for r in self.validation if math.isfinite(r["rel_error"])]
        return max(errs) if errs else math.nan


class Judge:
    """Each timing claim's verdict at a setting, memoised on the setting's values."""

    def __init__(self, spec: PaperSpec, runs: pd.DataFrame, curves: pd.DataFrame | None, paper: str,
                 retimer: Retimer, claims: Sequence[Any], claim_runs: Mapping[str, set[str]]) -> None:  # fmt: skip
        ids = {r.run_id for r in retimer.runs}
        keep = [c for c in runs.columns if c in needed_columns(spec, claims)]
        table = runs.loc[runs["run_id"].isin(ids), keep].reset_index(drop=True)
        self.runs = table.astype({c: object for c in table.columns if pd.api.types.is_string_dtype(table[c].dtype)})
        self.curves = None if curves is None else curves[curves["run_id"].isin(ids)].reset_index(drop=True)
        self.spec, self.paper, self.retimer, self.claims = spec, paper, retimer, list(claims)
        #: per claim, the variables its runs depend on (profile figures of their profiles, arm assumptions)
        self.relevant = {
            c.id: sorted({n for r in retimer.runs if r.run_id in claim_runs.get(c.id, ()) for n in r.variables})
            for c in self.claims
        }
        self._memo: dict[tuple[tuple[str, float], ...], dict[str, Point]] = {}
        self.units: dict[str, str] = {}
        self.bands: dict[str, tuple[float, float] | None] = {}

    def __call__(self, setting: Mapping[str, float]) -> dict[str, Point]:
        key = tuple(sorted((k, float(v)) for k, v in setting.items()))
        if key not in self._memo:
            runs, curves = self.retimer.tables(self.runs, self.curves, setting)
            out = {}
            for claim in self.claims:
                v = evaluate_claim(claim, self.spec, runs, curves, self.paper)
                self.units.setdefault(claim.id, v.unit)
                if v.band is not None:
                    self.bands.setdefault(claim.id, v.band)
                out[claim.id] = Point(v.verdict, math.nan if v.statistic is None else float(v.statistic))
            self._memo[key] = out
        return self._memo[key]


def _rank_corr(x: np.ndarray, y: np.ndarray) -> float:
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 3 or np.ptp(x[ok]) == 0 or np.ptp(y[ok]) == 0:
        return 0.0
    rx, ry = np.argsort(np.argsort(x[ok])), np.argsort(np.argsort(y[ok]))
    return float(np.corrcoef(rx, ry)[0, 1])


def _flips(judge: Judge, space: Space, claim_id: str, name: str,
           scan: list[tuple[float, Point]], bisect: int) -> list[Flip]:  # fmt: skip
    var, central = space[name], space.central()
    out = []
    qs = [var.range.quantile(v) for v, _ in scan]
    for i in range(len(scan) - 1):
        (q0, a), (q1, b) = (qs[i], scan[i][1]), (qs[i + 1], scan[i + 1][1])
        if a.verdict == b.verdict:
            continue
        if var.choices:  # nothing lies between two choices: the flip is at the next one
            out.append(Flip(name, scan[i + 1][0], a.verdict, b.verdict))
            continue
        lo, hi = q0, q1
        for _ in range(bisect):
            mid = (lo + hi) / 2
            if judge({**central, name: var.at(mid)})[claim_id].verdict == a.verdict:
                lo = mid
            else:
                hi = mid
        out.append(Flip(name, var.at((lo + hi) / 2), a.verdict, b.verdict))
    return out


def run_sweep(judge: Judge, space: Space, samples: int, seed: int, points: int = 9, bisect: int = 10,
              heat_points: int = 9,
              progress: Phases | None = None) -> tuple[list[ClaimSensitivity], np.ndarray]:  # fmt: skip
    """The designs of the module docstring for every claim ``judge`` knows; also returns the LHS.

    ``progress`` hears of each setting judged (the unit of the sweep's cost: one re-timing of every run and
    every claim's verdict), in three phases: the central values and the LHS, the scans, then per claim its
    flip points and heat map (up to ``heat_points``² settings each)."""
    shown = progress if progress is not None else NoPhases()
    central = space.central()
    design = latin_hypercube(samples, len(space.variables), seed)
    grids = {v.name: [v.at(q) for q in oat_quantiles(v, points)] for v in space.variables}
    shown.phase(f"Latin hypercube of {counted(samples, 'setting')}", samples + 1)
    settings = [space.setting(row) for row in design]
    scanned = [{**central, name: value} for name, values in grids.items() for value in values]
    judge.retimer.prefetch([central, {}, *settings, *scanned])  # each run's settings in one pass (lanes)
    at_central = judge(central)
    shown.advance()
    lhs = []
    for setting in settings:
        lhs.append(judge(setting))
        shown.advance()
    shown.phase(f"one-at-a-time scans of {counted(len(grids), 'figure')}", sum(len(g) for g in grids.values()))
    scans: dict[str, list[tuple[float, dict[str, Point]]]] = {}
    for name, values in grids.items():
        scans[name] = []
        for value in values:
            scans[name].append((value, judge({**central, name: value})))
            shown.advance()
    shown.phase(f"flip points and heat maps of {counted(len(judge.claims), 'claim')}", len(judge.claims))
    out = []
    for claim in judge.claims:
        cid = claim.id
        relevant = [n for n in space.names if n in judge.relevant[cid]]
        cs = ClaimSensitivity(cid, claim.statement or "", judge.units.get(cid, ""), judge.bands.get(cid),
                              at_central[cid], relevant)  # fmt: skip
        cs.lhs = [p[cid] for p in lhs]
        stats = np.array([p.statistic for p in cs.lhs], dtype=float)
        for j, v in enumerate(space.variables):
            cs.oat[v.name] = [(value, p[cid]) for value, p in scans[v.name]]
            cs.rank_corr[v.name] = _rank_corr(design[:, j], stats)
            scan = cs.oat[v.name]
            cs.tornado.append(Bar(v.name, scan[0][1], scan[-1][1]))
            cs.flips += _flips(judge, space, cid, v.name, scan, bisect)
        cs.tornado.sort(key=lambda b: -b.span)
        if len({p.verdict for p in cs.lhs}) > 1:
            top = [b.variable for b in cs.tornado if b.variable in relevant and b.span > 0][:2]
            if len(top) < 2:  # one figure moves it alone: pair it with the one most correlated in the LHS
                top += sorted((n for n in relevant if n not in top), key=lambda n: -abs(cs.rank_corr[n]))[
                    : 2 - len(top)
                ]
            if len(top) == 2:
                cs.heat = _heat(judge, space, cid, top[0], top[1], heat_points)
        out.append(cs)
        shown.advance()
    return out, design


def _heat(judge: Judge, space: Space, cid: str, x: str, y: str, n: int) -> Heat:
    central = space.central()
    xs, ys = space[x].grid(n), space[y].grid(n)
    grid = [[judge({**central, x: a, y: b})[cid] for a in xs] for b in ys]
    return Heat(x, y, xs, ys, [[p.statistic for p in row] for row in grid], [[p.verdict for p in row] for row in grid])


def sweep_seed(paper: str, spec_seed: int, samples: int) -> int:
    """The LHS generator's seed: derived from the paper id, the spec's seed and the size."""
    return derive_seed("sensitivity", paper, spec_seed, samples)
