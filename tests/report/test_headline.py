"""The first screen's tally line for the claims outside the headline counts those claims only."""

from __future__ import annotations

from distrepro.claims.schema import validate_paper
from distrepro.claims.tally import tally
from distrepro.claims.verdict_record import Verdict
from distrepro.report.headline import first_screen, outside_headline


def _claim(cid: str, evidence: str) -> dict[str, object]:
    return {"id": cid, "kind": "final_metric", "arm": "a", "metric": "val_accuracy", "direction": "max",
            "claimed": 0.9, "source": {"kind": "table"}, "evidence": evidence}  # fmt: skip


# three headline claims (verbatim: the paper's own), two derived readings (reconstructed: ours)
SPEC = validate_paper(
    {
        "kind": "reproduction",
        "citation": {"id": "t", "title": "Tally"},
        "setup": {"profile": "p", "baseline": "a"},
        "claims": [_claim(f"H{i}", "verbatim") for i in range(3)]
        + [_claim(f"D{i}", "reconstructed") for i in range(2)],
    }
)
VERDICTS = {"H0": "PASS", "H1": "PASS", "H2": "FAIL", "D0": "INCONCLUSIVE", "D1": "FAIL"}


def _verdicts() -> list[Verdict]:
    return [Verdict(cid, "final_metric", v, "reason", miss="falls short" if v == "FAIL" else "")  # type: ignore[arg-type]
            for cid, v in VERDICTS.items()]  # fmt: skip


def test_outside_headline_counts_the_other_claims_only() -> None:
    text, n = outside_headline(tally(SPEC.claims, _verdicts()))
    assert n == 2
    assert text == "0 PASS · 1 FAIL · 1 INCONCLUSIVE"  # not the headline's 2 PASS and its FAIL


def test_first_screen_says_the_other_claims_apart_from_the_headline() -> None:
    screen = first_screen(SPEC, _verdicts())
    assert "_Also judged, outside the headline: 0 PASS · 1 FAIL · 1 INCONCLUSIVE over the other 2 claims._" in screen
    only_headline = [c for c in SPEC.claims if c.id.startswith("H")]
    spec = SPEC.model_copy(update={"claims": only_headline})
    assert "outside the headline" not in first_screen(spec, [v for v in _verdicts() if v.claim_id.startswith("H")])
