"""The claims figure stays readable with many claims and long words: no text past the figure's edge, none over
another, the legend off the panels, every number with its unit, every axis label in words."""

from __future__ import annotations

from typing import Any

import pytest
from figure_text import legends_over_data, overlapping_texts, texts_outside
from matplotlib.text import Text

from distrepro.claims.schema import validate_paper
from distrepro.claims.verdict_record import Verdict
from distrepro.report.figures import claim_axis_label, claims_figure

SRC = {"source": {"kind": "abstract"}, "evidence": "verbatim"}
ARMS = ["adaptive-wan-heterogeneous-eight-workers", "equal-wan-heterogeneous-eight-workers", "static-eight"]
LONG_MISS = "falls short of the claim by more than the tolerance the paper allows on this emulated cluster"


def _claims(n: int) -> list[dict[str, Any]]:
    """``n`` claims cycling through every plotted kind, each with a long id."""
    a, b, c = ARMS
    kinds = [
        {"kind": "speedup", "arm": a, "baseline": b, "claimed": 3.0},
        {"kind": "relative_improvement", "arm": a, "baseline": b, "metric": "final/emulated_s", "direction": "min",
         "claimed": 0.2, "accept": {"abs_tolerance": 0.05}},
        {"kind": "ordering", "arms": [c, b, a], "metric": "final/emulated_s", "direction": "min"},
        {"kind": "non_inferiority", "arm": c, "baseline": b, "metric": "final/val_accuracy", "direction": "max",
         "margin": 0.02},
        {"kind": "final_metric", "arm": a, "metric": "val_accuracy", "direction": "max", "claimed": 0.9,
         "accept": {"abs_tolerance": 0.01}, "ideal": {"value": 0.95, "label": "perfect"}},
        {"kind": "convergence", "arm": a, "target": {"metric": "val_accuracy", "value": 0.7, "direction": "max"},
         "unit": "emulated_s", "claimed": 40.0, "accept": {"rel_tolerance": 0.1}},
        {"kind": "final_metric", "arm": a, "metric": "method/sqrt_chi1_over_chi2", "direction": "max", "claimed": 1.4,
         "accept": {"rel_tolerance": 0.1}},
    ]  # fmt: skip
    return [{"id": f"B-C{i}-mis-wan-heterogeneous", **kinds[i % len(kinds)], **SRC} for i in range(n)]


def _spec(n: int) -> Any:
    arms = {name: {"method": "alloc", "params": {"mode": name.split("-")[0]}} for name in ARMS}
    return validate_paper(
        {
            "kind": "reproduction",
            "citation": {"id": "many", "title": "Many claims"},
            "setup": {"baseline": ARMS[1], "arms": arms, "min_seeds": 3},
            "claims": _claims(n),
        }
    )


def _verdict(claim: Any, i: int) -> Verdict:
    units = {"speedup": "x", "relative_improvement": "fraction", "convergence": getattr(claim, "unit", "")}
    unit = units.get(claim.kind, getattr(claim, "metric", ""))
    value = {"x": 2.4, "fraction": 0.18, "emulated_s": 43.56}.get(unit, 0.0123 * (i + 1))
    verdict = ("PASS", "FAIL", "INCONCLUSIVE")[i % 3]
    return Verdict(
        claim.id, claim.kind, verdict, "", statistic=value, ci=(0.9 * value, 1.1 * value),
        band=(0.5 * value, 2 * value),
        unit=unit, n_seeds=3, points={0: 0.95 * value, 1: value, 2: 1.05 * value},
        miss=LONG_MISS if verdict == "FAIL" else "",
    )  # fmt: skip


@pytest.mark.parametrize("n_claims", [1, 7, 14])
def test_claims_figure_keeps_every_text_inside_and_apart(n_claims: int) -> None:
    spec = _spec(n_claims)
    claims = {c.id: c for c in spec.claims}
    fig = claims_figure([_verdict(c, i) for i, c in enumerate(spec.claims)], claims)
    assert fig is not None
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    assert texts_outside(fig, renderer) == []
    assert overlapping_texts(fig, renderer) == []
    assert legends_over_data(fig, renderer) == []


def test_claims_figure_titles_carry_units() -> None:
    spec = _spec(7)
    claims = {c.id: c for c in spec.claims}
    fig = claims_figure([_verdict(c, i) for i, c in enumerate(spec.claims)], claims)
    assert fig is not None
    titles = [ax.get_title().replace("\n", " ") for ax in fig.axes if ax.get_visible()]
    assert titles[0].endswith("2.4×")  # speedup
    assert titles[1].endswith("18%")  # a reduction, a fraction in per cent
    assert titles[2].endswith("+0.0369 s")  # an ordering gap in emulated seconds
    assert titles[3].endswith("+4.92 pts")  # an accuracy difference in percentage points
    assert titles[4].endswith("6.15%")  # an accuracy
    assert titles[5].endswith("43.56 s")  # seconds to the target
    assert titles[6].endswith("0.0861")  # a method's own unitless value stays a bare number
    texts = [t.get_text() for t in fig.findobj(Text) if t.get_visible()]
    assert not any("final/" in t or "val_accuracy" in t or "emulated_s" in t for t in texts), texts


def test_claim_axis_label_names_metrics_in_words() -> None:
    claims = {c.id: c for c in _spec(7).claims}
    labels = [claim_axis_label(c) for c in claims.values()]
    assert labels[3].startswith("difference in validation accuracy (pts)")
    assert labels[2].startswith("smallest gap between adjacent arms in median emulated time for the budget (s)")
    assert labels[5].startswith("emulated seconds to reach validation accuracy ≥ 70%")
    assert labels[6] == "method/sqrt_chi1_over_chi2"  # unknown to the table: the key itself
