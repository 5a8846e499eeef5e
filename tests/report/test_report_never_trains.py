"""The report reads what orchestration produced and never trains: no module of ``distrepro.report`` reaches the
campaign runner or an engine, directly, lazily or through another module, and ``nox -s lint`` holds it to that."""

from __future__ import annotations

import tomllib
from pathlib import Path

import grimp
import pytest

from distrepro.report.plugin_context import NoTrainingHarness, ReadingContext

REPO = Path(__file__).resolve().parents[2]
FORBIDDEN = ("distrepro.orchestration.campaign", "distrepro.engine")


def test_no_report_module_imports_the_campaign_runner_or_an_engine() -> None:
    graph = grimp.build_graph("distrepro", cache_dir=None)  # function-level imports included
    for forbidden in FORBIDDEN:
        chain = graph.find_shortest_chains(importer="distrepro.report", imported=forbidden)
        assert not chain, f"distrepro.report reaches {forbidden}: {sorted(chain)}"


def test_the_lint_contract_forbids_it_without_exceptions() -> None:
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (contract,) = [
        c
        for c in contracts
        if c["type"] == "forbidden"
        and "distrepro.report" in c["source_modules"]
        and "distrepro.orchestration.campaign" in c["forbidden_modules"]
    ]
    assert set(contract["forbidden_modules"]) == set(FORBIDDEN)
    assert "ignore_imports" not in contract and not contract.get("allow_indirect_imports", False)


def test_the_reports_own_context_says_it_cannot_train(tmp_path: Path) -> None:
    ctx = ReadingContext(tmp_path, tmp_path / "figures", "proxy")
    with pytest.raises(NoTrainingHarness, match="cannot train a run"):
        ctx.train({})
    with pytest.raises(NoTrainingHarness, match="cannot plan a config"):
        ctx.plan(tmp_path / "config.yaml")
