"""A timing claim's details show the model interval (the emulator's validated error) beside the seed interval, and
whether the seed verdict held at every corner of the arms' error bands."""

from __future__ import annotations

import pytest

from distrepro.claims.verdict_record import Verdict
from distrepro.report.claims_sections import _rule_lines

pytestmark = pytest.mark.smoke


def _timing(within: bool) -> Verdict:
    v = Verdict("F6", "speedup", "INCONCLUSIVE" if within else "FAIL", "", unit="x")
    v.model_interval, v.within_model_error = (1.02, 3.2), within
    v.model_basis = "'accum_aer' ±53.0% (the paper's own cell decentdp-a40-16-aer (decentdp), predicted -53.0% …)"
    return v


def test_the_model_interval_and_each_arms_band_are_in_the_details() -> None:
    (line,) = [x for x in _rule_lines(_timing(within=True)) if x.startswith("- model interval")]
    assert "[1.02×, 3.2×]" in line and "does not hold at every corner: INCONCLUSIVE" in line
    assert "decentdp-a40-16-aer" in line
    (held,) = [x for x in _rule_lines(_timing(within=False)) if x.startswith("- model interval")]
    assert "holds at every corner" in held and "INCONCLUSIVE" not in held


def test_a_verdict_without_emulated_values_has_no_model_interval() -> None:
    assert not [x for x in _rule_lines(Verdict("A", "non_inferiority", "PASS", "")) if "model interval" in x]
