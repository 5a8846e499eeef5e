"""The ``paper.yaml`` claims format: what a paper says, as data the verdict engine can check.

A method folder's ``paper.yaml`` already names the paper (``kind``, ``citation``). A reproduction
adds ``setup:`` (the arms compared and where) and ``claims:``, one entry per quantitative claim.
Claims are a *closed set of kinds* (MLPerf's checker power without its ``eval``'d YAML strings):
each kind fixes how a number is computed from the runs, so a claims file can be linted, diffed
and trusted. Every claim states its metric's ``direction`` (MLPerf #162: direction inferred from
a metric's name broke a checker), where in the paper it comes from, and how much of it is the
paper's own words (``evidence``). See ``docs/claims.md`` for the field reference and examples.

The acceptance rules and their defaults live in :mod:`distrepro.claims.acceptance` (re-exported here).

Errors are :class:`~distrepro.errors.ConfigError` naming the file and the field, e.g.
``methods/x/paper.yaml: field 'claims[2].direction': Input should be 'max' or 'min'``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from distrepro.claims.acceptance import (
    DEFAULT_MIN_SEEDS,
    Accept,
    acceptance_band,
    claimed_bounds,
    default_ci_method,
    default_paired,
    default_statistic,
)
from distrepro.claims.evidence import ORIGIN_OF
from distrepro.claims.references import check_references
from distrepro.claims.regime import RegimeCondition, condition_arms
from distrepro.claims.sensitivity_spec import SensitivitySpec
from distrepro.config.run_config import read_yaml
from distrepro.config.yaml_errors import CLAIM_KINDS, precheck_kinds, pydantic_error
from distrepro.names import name_problem

Direction = Literal["max", "min"]
Evidence = Literal["verbatim", "figure", "derived", "reconstructed"]
Origin = Literal["paper", "derived", "reconstructed"]
DecidedBy = Literal["measurement", "model_structure"]
Scale = Literal["paper", "mid", "gpu", "proxy"]
#: scales that train bigger on the same emulated hardware: they re-decide accuracy and convergence claims only
#: (mid: <= 30 min per paper on 2 CPU cores; gpu: <= 1 h per paper on one 80 GB GPU, ``device: cuda``)
TRAINING_SCALES: tuple[str, ...] = ("mid", "gpu")
_ID = r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$"
Finite = Annotated[float, Field(allow_inf_nan=False)]
__all__ = ["CLAIM_KINDS", "Accept", "Claim", "PaperSpec", "acceptance_band", "claimed_bounds", "validate_paper"]


class _Strict(BaseModel):
    """Unknown keys are errors: ``claimd: 0.9`` must not silently leave the claim without a value."""

    model_config = ConfigDict(extra="forbid")


class Citation(_Strict):
    id: str = Field(pattern=_ID)
    title: str
    authors: str | None = None
    venue: str | None = None
    url: str | None = None
    arxiv: str | None = None
    doi: str | None = None


class Arm(_Strict):
    """A named arm of a comparison: the runs of ``method`` whose ``method_params`` include ``params``.

    ``params`` tells apart arms of one method (``local_sgd`` with ``period: 8`` vs ``32``);
    ``campaign`` restricts to runs of one campaign (the run config's ``name``); ``config`` is the
    run config that produces the arm, for the reproduce command and for readers. An ``optional``
    arm (one that needs an extra install, a real process group, or hours) is reproduced only when
    asked for by name (``--with``/``--arms``); ``extra`` names the pip extra it needs, so the nox
    session can install it.
    """

    method: str = Field(min_length=1)
    params: dict[str, Any] = Field(default_factory=dict)
    campaign: str | None = None
    config: str | None = None
    label: str | None = None
    optional: bool = False
    extra: str | None = None


class Setup(_Strict):
    """Defaults for every claim: the profile and scale they are checked at, the baseline, the arms."""

    profile: str | None = None
    scale: Scale = "proxy"
    min_seeds: int = Field(default=DEFAULT_MIN_SEEDS, ge=1)
    baseline: str | None = None
    arms: dict[str, Arm] = Field(default_factory=dict)
    notes: str | None = None
    #: ranges of reconstructed method assumptions and the sweep size (distrepro/claims/sensitivity_spec.py)
    sensitivity: SensitivitySpec = Field(default_factory=SensitivitySpec)

    @field_validator("arms")
    @classmethod
    def _arm_names(cls, v: dict[str, Arm]) -> dict[str, Arm]:
        """An arm's name becomes a campaign name and a config file stem (``<arm>.paper.yaml``)."""
        for name in v:
            problem = name_problem(name)
            if problem:
                raise ValueError(f"arm {name!r} is {problem}")
        return v


class Source(_Strict):
    """Where the claim is in the paper: ``kind`` (table/figure/abstract/text), ``ref`` ("Table 3"), a short quote."""

    kind: Literal["table", "figure", "abstract", "text"]
    ref: str | None = None
    quote: str | None = None


class Target(_Strict):
    metric: str = Field(min_length=1)
    value: Finite
    direction: Direction


class Ideal(_Strict):
    """A bound no method can beat (e.g. perfect load balance), shown beside the measured value.

    Bounds depend on the run configs (work, cluster), so one holds at one ``scale`` (default: its
    claim's) and a report judged at another scale leaves it out.
    """

    value: Finite
    label: str
    scale: Scale | None = None


Claimed = Finite | tuple[Finite, Finite]


class _ClaimBase(_Strict):
    """Fields of every claim. ``origin`` and ``decided_by`` say what kind of evidence a verdict is.

    ``origin``: ``paper`` (the claim as the paper states it), ``derived`` (computed from the
    paper's claims, e.g. an ordering two of its numbers imply), ``reconstructed`` (our reading or
    test of something the paper says without a number or a baseline). Default: from ``evidence``
    (``verbatim``/``figure`` → ``paper``). Only ``paper`` claims decided by measurement count in
    the headline tally: a derived reading re-counts the paper's numbers, and a claim decided by
    ``model_structure`` (``why`` says how) can only come out one way in the emulator, whatever
    the runs do, so it is no evidence about the paper.
    """

    id: str = Field(pattern=_ID)
    statement: str | None = None
    source: Source
    evidence: Evidence
    origin: Origin | None = None
    decided_by: DecidedBy = "measurement"
    why: str | None = None
    arm: str | None = None
    profile: str | None = None
    scale: Scale | None = None
    accept: Accept = Field(default_factory=Accept)
    ideal: Ideal | None = None
    notes: str | None = None
    conflicts_with: list[str] = Field(default_factory=list)
    #: counted once with another claim in the tallies: the two cannot both hold (an inconsistent pair, e.g. a
    #: FLOPS ratio and a time cut that imply different speedups) or restate one number (``same_as``)
    counts_with: str | None = None
    same_as: str | None = None
    #: conditions on the deciding runs that put them in the paper's regime (suite/claims/regime.py)
    regime: list[RegimeCondition] = Field(default_factory=list)
    #: choices about this claim made after its verdicts were seen (a seed count raised after an INCONCLUSIVE, a
    #: threshold or metric changed after a FAIL); the report prints them beside the verdict (claims/preregistration.py)
    post_hoc: list[str] = Field(default_factory=list)

    @field_validator("post_hoc", mode="before")
    @classmethod
    def _one_note_is_a_list(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @field_validator("claimed", check_fields=False)
    @classmethod
    def _range_ordered(cls, v: Any) -> Any:
        if isinstance(v, tuple) and v[0] > v[1]:
            raise ValueError(f"a claimed range must be [low, high], got [{v[0]}, {v[1]}]")
        return v


class SpeedupClaim(_ClaimBase):
    """``baseline time / arm time``: time to a quality target, or to finish the budget."""

    kind: Literal["speedup"]
    baseline: str | None = None
    measure: Literal["budget_time", "time_to_target"] = "budget_time"
    clock: Literal["emulated", "wall", "steps", "epochs", "samples"] = "emulated"
    target: Target | None = None  # time_to_target: None uses the runs' own logged time_to_target_s
    claimed: Claimed


class FinalMetricClaim(_ClaimBase):
    kind: Literal["final_metric"]
    metric: str = Field(min_length=1)
    direction: Direction
    claimed: Claimed


class RelativeImprovementClaim(_ClaimBase):
    """``fraction``: (arm−base)/base signed so positive is better ("time reduced by 72%" → 0.72);
    ``ratio``: arm/base, or base/arm for a ``min`` metric ("21.6 times the FLOPS" → 21.6);
    ``difference``: arm − base in the metric's unit, signed so positive is better ("+1.16% top-1" → 0.0116)."""

    kind: Literal["relative_improvement"]
    metric: str = Field(min_length=1)
    direction: Direction
    baseline: str | None = None
    form: Literal["fraction", "ratio", "difference"] = "fraction"
    claimed: Claimed


class ConvergenceClaim(_ClaimBase):
    """Hardware-free convergence (MLPerf RCP style): epochs/steps/samples until ``target`` is met."""

    kind: Literal["convergence"]
    target: Target
    unit: Literal["epochs", "steps", "samples", "emulated_s"] = "epochs"
    claimed: Claimed


class OrderingClaim(_ClaimBase):
    """``arms`` are claimed best first on ``metric``; each adjacent gap must exceed ``margin``."""

    kind: Literal["ordering"]
    arms: list[str] = Field(min_length=2)
    metric: str = Field(min_length=1)
    direction: Direction
    margin: float = Field(default=0.0, ge=0, allow_inf_nan=False)


class NonInferiorityClaim(_ClaimBase):
    """The arm is no worse than the baseline by more than ``margin`` (abs, or rel to the baseline)."""

    kind: Literal["non_inferiority"]
    metric: str = Field(min_length=1)
    direction: Direction
    baseline: str | None = None
    margin: float = Field(gt=0, allow_inf_nan=False)
    margin_kind: Literal["abs", "rel"] = "abs"


Claim = (
    SpeedupClaim | FinalMetricClaim | RelativeImprovementClaim | ConvergenceClaim | OrderingClaim | NonInferiorityClaim
)
_BY_KIND: dict[str, type[BaseModel]] = {
    "speedup": SpeedupClaim,
    "final_metric": FinalMetricClaim,
    "relative_improvement": RelativeImprovementClaim,
    "convergence": ConvergenceClaim,
    "ordering": OrderingClaim,
    "non_inferiority": NonInferiorityClaim,
}


class PaperSpec(_Strict):
    kind: Literal["baseline", "reproduction"]
    citation: Citation
    setup: Setup = Field(default_factory=Setup)
    claims: list[Annotated[Claim, Field(discriminator="kind")]] = Field(default_factory=list)

    def arm(self, name: str) -> Arm:
        """The arm called ``name``; a name not in ``setup.arms`` means all runs of that method."""
        return self.setup.arms.get(name) or Arm(method=name)


def claim_arms(claim: Any) -> list[str]:
    """Every arm a claim reads: its arm(s), its baseline and the arms of its regime conditions."""
    names = list(claim.arms) if claim.kind == "ordering" else [claim.arm]
    if getattr(claim, "baseline", None):
        names.append(claim.baseline)
    for cond in claim.regime:
        names += condition_arms(claim, cond)
    return list(dict.fromkeys(names))


#: metrics of time and bytes: emulated from the hardware profile, so the mid and gpu scales (bigger *training*) add
#: nothing; useful FLOPs per emulated second (C-ADP's FLOPS) and the share of time not computing (A²CiD²'s Fig. 2)
#: are read off the emulated clock too
_TIMING_PREFIXES = (
    "final/emulated_s",
    "final/wall_s",
    "time/",
    "time_to_target",
    "final/idle",
    "final/useful_flops",
    "final/non_compute",
    "comm/",
    "worker/",
)


def judged_at_mid(claim: Any) -> bool:
    """Whether the mid scale re-decides ``claim``: accuracy and convergence claims do; speedups and claims on
    emulated time, idle time or bytes stay at the proxy scale (their numbers come from the hardware profile)."""
    if claim.kind == "speedup":
        return False
    metric = getattr(claim, "metric", None) or getattr(getattr(claim, "target", None), "metric", "")
    return not str(metric).startswith(_TIMING_PREFIXES)


def at_scale(spec: PaperSpec, scale: Scale, available: set[str] | None = None) -> PaperSpec:
    """``spec`` (resolved) judged at ``scale``: the claims at the paper's scale move to it (a claim
    pinned to another scale stays there); ideals computed for a scale other than their claim's are dropped.
    At the mid and gpu scales (:data:`TRAINING_SCALES`) only accuracy and convergence claims move
    (:func:`judged_at_mid`), and only those whose arms are all in ``available`` (the arms with a ``.mid.yaml`` /
    ``.gpu.yaml``); the others stay, and the report says so."""
    claims = []
    for claim in spec.claims:
        moved = scale if claim.scale == spec.setup.scale else claim.scale
        stays = not judged_at_mid(claim) or (available is not None and not set(claim_arms(claim)) <= available)
        if scale in TRAINING_SCALES and moved == scale and stays:
            moved = claim.scale
        ideal = claim.ideal
        if ideal is not None and (ideal.scale or claim.scale) != moved:
            ideal = None
        claims.append(claim.model_copy(update={"scale": moved, "ideal": ideal}))
    setup = spec.setup.model_copy(update={"scale": scale})
    return spec.model_copy(update={"setup": setup, "claims": claims})


def _resolve(spec: PaperSpec) -> PaperSpec:
    """Fill every claim's defaults from ``setup`` so the engine never has to look twice."""
    claims = []
    for claim in spec.claims:
        statistic = claim.accept.statistic or default_statistic(claim)
        paired = claim.accept.paired if claim.accept.paired is not None else default_paired(claim)
        accept = claim.accept.model_copy(
            update={
                "statistic": statistic,
                "paired": paired,
                "ci_method": claim.accept.ci_method or default_ci_method(statistic, paired, claim.kind),
                "min_seeds": claim.accept.min_seeds or spec.setup.min_seeds,
            }
        )
        update: dict[str, Any] = {
            "accept": accept,
            "profile": claim.profile or spec.setup.profile,
            "scale": claim.scale or spec.setup.scale,
            "origin": claim.origin or ORIGIN_OF[claim.evidence],
        }
        if hasattr(claim, "baseline"):
            update["baseline"] = claim.baseline or spec.setup.baseline
        claims.append(claim.model_copy(update=update))
    return spec.model_copy(update={"claims": claims})


def validate_paper(
    data: dict[str, Any], source: str | Path | None = None, known_methods: set[str] | None = None
) -> PaperSpec:
    """Validate a parsed ``paper.yaml``; returns the spec with every claim's defaults resolved.

    ``known_methods`` (method folder names) lets arm names be checked; ``None`` skips that check.
    """
    precheck_kinds(source, data)
    try:
        spec = PaperSpec.model_validate(data)
    except ValidationError as exc:
        raise pydantic_error(source, exc) from None
    check_references(spec, source, known_methods)
    return _resolve(spec)


def load_paper_file(path: str | Path, known_methods: set[str] | None = None) -> PaperSpec:
    path = Path(path)
    return validate_paper(read_yaml(path), path, known_methods)
