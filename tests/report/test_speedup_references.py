"""Each profile's reference arm for the speedup figure: the baseline where it ran, elsewhere the arm set up as it."""

from __future__ import annotations

from distrepro.claims.schema import PaperSpec, validate_paper
from distrepro.report.figures import arm_style
from distrepro.report.speedup_references import speedup_marks, speedup_references


def _spec() -> PaperSpec:
    def arm(mode: str) -> dict[str, object]:
        return {"method": "alloc", "params": {"mode": mode}}

    src = {"source": {"kind": "abstract"}, "evidence": "verbatim"}
    return validate_paper(
        {
            "kind": "reproduction",
            "citation": {"id": "refs", "title": "References"},
            "setup": {
                "baseline": "eq-a",
                "arms": {
                    "eq-a": arm("equal"), "ad-a": arm("adaptive"), "eq-b": arm("equal"), "ad-b": arm("adaptive"),
                    "eq-c1": arm("equal"), "eq-c2": arm("equal"), "ad-c": arm("adaptive"), "ad-d": arm("adaptive"),
                },
            },
            "claims": [
                {"id": "S1", "kind": "speedup", "arm": "ad-b", "baseline": "eq-b", "claimed": 2.0, **src},
                {"id": "S2", "kind": "speedup", "arm": "ad-b", "claimed": 3.0, **src},  # over eq-a: another cluster
                {"id": "S3", "kind": "speedup", "arm": "ad-a", "claimed": 1.5, **src},  # over eq-a (setup.baseline)
            ],
        }
    )  # fmt: skip


def test_each_profile_gets_the_arm_set_up_as_the_baseline_and_no_guess_when_ambiguous() -> None:
    spec = _spec()
    groups = {"eq-a": "A", "ad-a": "A", "eq-b": "B", "ad-b": "B", "eq-c1": "C", "eq-c2": "C", "ad-c": "C", "ad-d": "D"}
    style = arm_style(list(groups), groups)
    refs = speedup_references(spec, "eq-a", style)
    assert refs == {"A": "eq-a", "B": "eq-b"}  # C has two candidates (no guess), D none
    marks = speedup_marks(spec, refs, style)
    assert marks == {"ad-b": [("S1", "budget", 2.0)], "ad-a": [("S3", "budget", 1.5)]}


def test_a_baseline_that_ran_on_several_profiles_is_each_ones_reference() -> None:
    labels = ["eq-a @ A", "ad-a @ A", "eq-a @ B", "ad-a @ B"]
    style = arm_style(labels, {lab: lab.split(" @ ")[1] for lab in labels})
    assert speedup_references(_spec(), "eq-a", style) == {"A": "eq-a @ A", "B": "eq-a @ B"}
    assert speedup_references(_spec(), None, style) == {}
