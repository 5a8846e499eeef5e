"""How often a verdict holds on fresh seeds (``benchmarks/verdict_history.py``): RESULTS.md's rows and marks
parsed, consecutive versions compared, PASS ↔ FAIL flips named, recipe changes counted apart."""

from __future__ import annotations

import pytest
from benchmark_module import benchmark_module

pytestmark = pytest.mark.smoke

MARK = "<!-- frozen-inputs paper=p paper.yaml={paper} arm-configs={configs} emulator-and-claims-code={code} -->"


def _results(verdicts: dict[str, str], paper: str = "a", configs: str = "b", code: str = "c") -> str:
    rows = "\n".join(
        f"| `{claim}` | derived | {verdict} · words | stat | [0, 1] | 5 | why |" for claim, verdict in verdicts.items()
    )
    return f"""## A paper (`p`)

{MARK.format(paper=paper, configs=configs, code=code)}

| scale | headline |
|:--|:--|
| proxy | – |

### p at proxy scale

| claim | group | verdict | statistic | interval | seeds | reason |
|:--|:--|:--|:--|:--|:--|:--|
{rows}

### p at mid scale

| claim | group | verdict | statistic | interval | seeds | reason |
|:--|:--|:--|:--|:--|:--|:--|
| `X` | headline | **INCONCLUSIVE** · cannot be decided | – | – | 0 | arm missing |
"""


def test_rows_and_marks_are_read_per_scale() -> None:
    module = benchmark_module("verdict_history")
    version = module.parse(_results({"A": "PASS", "B": "FAIL"}), "abc", "2026-11-29")
    assert version.verdicts == {"p/proxy A": "PASS", "p/proxy B": "FAIL", "p/mid X": "INCONCLUSIVE"}
    assert version.inputs == {"p": {"paper.yaml": "a", "arm-configs": "b", "emulator-and-claims-code": "c"}}


def test_consecutive_versions_count_kept_rows_and_name_a_pass_fail_flip() -> None:
    module = benchmark_module("verdict_history")
    older = module.parse(_results({"A": "PASS", "B": "FAIL", "C": "INCONCLUSIVE"}), "old")
    newer = module.parse(_results({"A": "FAIL", "B": "FAIL", "C": "PASS", "D": "PASS"}, code="other"), "new")
    summary = module.compare(older, newer)
    # D is new (not compared); the emulator's code changed, the recipe did not: all 4 shared rows count as same recipe
    assert sum(summary.rows.values()) == 4 and summary.rows[True] == 4
    assert summary.kept[True] == 2  # B and X kept; A flipped, C moved from INCONCLUSIVE
    assert summary.flips == ["p/proxy A: PASS → FAIL"]
    text = module.report([older, newer], rows=True)
    assert "2 of 4 rows kept their verdict" in text and "| p/proxy C | I | P |" in text
    assert "p/proxy B" not in text.split("| row |")[1]  # a row that never moved is not listed


def test_a_changed_setup_is_counted_apart_and_an_unrecorded_kind_does_not_count() -> None:
    module = benchmark_module("verdict_history")
    assert not module.same_recipe({"paper.yaml": "a", "arm-configs": "b"}, {"paper.yaml": "a", "arm-configs": "z"})
    assert not module.same_recipe(None, {"paper.yaml": "a", "arm-configs": "b"})
    # the training code joined the mark later: absent from the older one, it is not a change
    assert module.same_recipe(
        {"paper.yaml": "a", "arm-configs": "b"},
        {"paper.yaml": "a", "arm-configs": "b", "method-and-training-code": "t"},
    )
    older = module.parse(_results({"A": "PASS"}), "old")
    newer = module.parse(_results({"A": "PASS"}, configs="changed"), "new")
    summary = module.compare(older, newer)
    assert summary.rows[False] == 2 and summary.kept[False] == 2 and summary.rows[True] == 0
