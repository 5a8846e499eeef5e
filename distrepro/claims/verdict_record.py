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
    arm_profiles: dict[str, list[str]] = field(default_factory=dict)  # arm → the profiles its deciding runs used
    skew: float | None = None  # adjusted skewness G1 of the per-seed values on the interval's scale
    skew_note: str = ""  # which end of a t-interval the skew guard widened, and why (distrepro.claims.intervals)
    plain_ci: tuple[float, float] | None = None  # a skew-guarded t-interval's plain counterpart (seeds are planned on)
    seeds_needed: int | None = None  # a straddling interval: seeds to clear the edge (distrepro.claims.planning)
    half_width: float | None = None  # a straddling interval: its half-width towards the edge, in the statistic's unit
    p_value: float | None = None  # one-sided p of the decision taken (PASS/FAIL), t approximation on the CI's scale
    holm: str = ""  # "stands" / "not after Holm" for a decided headline claim (distrepro.claims.tally)
    depends_on: str = ""  # a timing verdict that flips over the plausible hardware: the figure it depends on
    pass_share: float | None = None  # share of the plausible hardware settings in which the claim PASSes
    #: a claim merged with others (same_as / counts_with): the share of the settings in which their unit holds, which
    #: decides ``depends_on`` (distrepro.claims.tally.unit_shares), and the unit's other claims
    unit_pass_share: float | None = None
    unit_with: list[str] = field(default_factory=list)
    #: the point statistic's range over the corners of the arms' emulator error bands (distrepro.claims.model_interval)
    model_interval: tuple[float, float] | None = None
    model_error: dict[str, float] = field(default_factory=dict)  # arm → the relative error band of its emulated time
    model_basis: str = ""  # what each arm's band rests on, in words
    within_model_error: bool = False  # INCONCLUSIVE because a corner of the emulator's error does not share the verdict
    #: the level of ``ci`` (0.95, or a pre-registered Pocock plan's, e.g. 0.9706): what "<level> % CI" says
    ci_level: float | None = None
    #: why the verdict is post hoc (a choice that decides it was made or changed after the record): empty if not.
    #: A post-hoc verdict is shown, marked, and left out of the tally (distrepro.claims.tally.counted)
    post_hoc: str = ""
    #: the scale's record does not freeze the inputs beside the claims (an older record): a weaker flag than post hoc
    not_frozen: bool = False
    #: every arm's error band rests on validation points of its class (ErrorBand.covered), and the verdict held at
    #: every corner of the bands (distrepro.claims.model_interval.apply; both False where no check ran)
    model_covered: bool = False
    model_holds: bool = False
    #: what the verdict is evidence about (distrepro.claims.attribution.ABOUT): paper, emulation, proxy,
    #: reimplementation or inconsistent; empty until attributed
    about: str = ""

    @property
    def across_profiles(self) -> bool:
        """Arms compared on different profiles (emulated clusters): a seed index then pairs different runs."""
        return len({tuple(p) for p in self.arm_profiles.values()}) > 1

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["regime"] = [c.to_dict() for c in self.regime]
        for key in ("statistic", "ci", "band", "skew", "half_width", "p_value", "model_interval", "plain_ci"):
            out[key] = json_safe(out[key])
        out["points"] = {str(k): v for k, v in self.points.items()}
        for key in ("per_seed", "censored"):
            out[key] = {a: {str(k): json_safe(v) for k, v in d.items()} for a, d in getattr(self, key).items()}
        return out
