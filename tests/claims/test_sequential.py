"""The group-sequential level: Pocock's boundary, its error over two looks, and where the judging path applies it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from distrepro.claims.schema import validate_paper
from distrepro.claims.sequential import apply_plan, interval_level, pocock_boundary, pocock_level


@pytest.mark.smoke
@pytest.mark.parametrize(
    ("looks", "tabulated"),
    [([10], 1.960), ([5, 10], 2.178), ([3, 6, 9], 2.289)],  # Pocock (1977), two-sided 5 % = one-sided 2.5 %
)
def test_boundary_matches_pocock_table(looks: list[int], tabulated: float) -> None:
    assert pocock_boundary(looks) == pytest.approx(tabulated, abs=0.003)


def test_level_at_two_looks_is_about_97_percent() -> None:
    level = pocock_level([5, 10])
    assert 0.970 < level < 0.971
    assert level > 0.95  # wider than the fixed-n interval: the price of a second look


def _false_pass_rate(z: float, draws: int = 200_000) -> float:
    """Share of null score paths (looks at 5 and 10 of 10 increments) crossing ``z`` at either look."""
    rng = np.random.default_rng(20261127)  # a fixed, documented seed: the check must not vary between runs
    first = rng.standard_normal(draws) * math.sqrt(5)
    second = first + rng.standard_normal(draws) * math.sqrt(5)
    return float(np.mean((first / math.sqrt(5) > z) | (second / math.sqrt(10) > z)))


def test_two_nominal_looks_inflate_the_error_and_pocock_restores_it() -> None:
    nominal = _false_pass_rate(1.96)
    assert 0.038 < nominal < 0.046  # two looks at the 95 % level: about 4.2 %, not 2.5 %
    assert _false_pass_rate(pocock_boundary([5, 10])) == pytest.approx(0.025, abs=0.0015)


def test_bad_looks_are_refused() -> None:
    for looks in ([], [10, 5], [1, 2], [5, 5]):
        with pytest.raises(ValueError, match="looks must be increasing"):
            pocock_boundary(looks)


def _spec():
    return validate_paper(
        {
            "kind": "reproduction",
            "citation": {"id": "p", "title": "P"},
            "setup": {"scale": "mid", "min_seeds": 3, "baseline": "b"},
            "claims": [
                {
                    "id": "acc",
                    "kind": "ordering",
                    "arms": ["a", "b"],
                    "metric": "final/val_accuracy",
                    "direction": "max",
                    "source": {"kind": "text"},
                    "evidence": "reconstructed",
                },
                {
                    "id": "bytes",
                    "kind": "ordering",
                    "arms": ["a", "b"],
                    "metric": "comm/bytes_total",
                    "direction": "min",
                    "source": {"kind": "text"},
                    "evidence": "reconstructed",
                    "decided_by": "model_structure",
                    "why": "fixed by the schedule",
                },
                {
                    "id": "elsewhere",
                    "kind": "ordering",
                    "arms": ["a", "b"],
                    "metric": "final/val_accuracy",
                    "direction": "max",
                    "scale": "paper",
                    "source": {"kind": "text"},
                    "evidence": "reconstructed",
                },
            ],
        }
    )


def test_apply_plan_sets_the_level_of_measured_claims_at_the_scale_only() -> None:
    plan = {"design": "pocock", "looks": [5, 10], "interval": 0.9706}
    judged = {c.id: c.accept.ci for c in apply_plan(_spec(), plan, "mid").claims}
    assert judged == {"acc": 0.9706, "bytes": 0.95, "elsewhere": 0.95}


def test_without_a_sequential_plan_the_claims_own_level_stands() -> None:
    spec = _spec()
    assert apply_plan(spec, {"design": "fixed", "n": 10}, "mid") is spec
    assert apply_plan(spec, None, "mid") is spec
    assert interval_level(None, 0.95) == 0.95
    assert interval_level({"design": "pocock", "interval": 0.9706}, 0.95) == 0.9706
