"""One claim's verdict as a record: what :mod:`distrepro.claims.verdicts` produces and
:mod:`distrepro.claims.decide`, the report and the sensitivity sweep read. Kept apart from the rules that make
it so that the deciding rules and the evidence gathering do not import each other."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from distrepro.claims.regime import RegimeCheck
from distrepro.claims.stats import json_safe

VerdictKind = Literal["PASS", "FAIL", "INCONCLUSIVE"]


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
    paired: bool = False  # arms compared seed by seed (same seed index: same initial model and data order)
    ci_method: str = ""  # t, bca or percentile (see distrepro.claims.intervals)
    regime: list[RegimeCheck] = field(default_factory=list)  # the claim's regime checks (distrepro.claims.regime)
    out_of_regime: bool = False  # INCONCLUSIVE because the runs are outside the paper's regime (or arms tie)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["regime"] = [c.to_dict() for c in self.regime]
        for key in ("statistic", "ci", "band"):
            out[key] = json_safe(out[key])
        out["points"] = {str(k): v for k, v in self.points.items()}
        for key in ("per_seed", "censored"):
            out[key] = {a: {str(k): json_safe(v) for k, v in d.items()} for a, d in getattr(self, key).items()}
        return out
