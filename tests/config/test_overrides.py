"""``--set`` on the budget: a unit set to a number replaces the config's, a unit set to null clears only itself."""

from __future__ import annotations

import pytest

from distrepro.config.overrides import apply_overrides, parse_overrides
from distrepro.config.run_config import Budget
from distrepro.errors import format_pydantic_error

pytestmark = pytest.mark.smoke


def test_a_null_unit_clears_itself_and_keeps_the_unit_just_set() -> None:
    """``--set budget.steps=3 --set budget.epochs=null`` was refused with "(got none)": the null dropped steps too."""
    data = {"budget": {"epochs": 2.0}}
    out = apply_overrides(data, parse_overrides(["budget.steps=3", "budget.epochs=null"]))
    assert Budget(**out["budget"]).steps == 3
    assert apply_overrides(data, parse_overrides(["budget.steps=3"]))["budget"] == {"steps": 3}


def test_a_budget_left_with_no_unit_says_so() -> None:
    out = apply_overrides({"budget": {"steps": 2}}, parse_overrides(["budget.steps=null"]))
    with pytest.raises(ValueError) as caught:
        Budget(**out["budget"])
    line = str(format_pydantic_error("tiny.yaml", caught.value))
    assert "none is set: a unit set to null is cleared" in line and "(got none)" not in line, line
