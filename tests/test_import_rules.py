"""The import rules of ``nox -s lint`` (tools/check_imports.py): they hold on the repository, and each one finds
what it is meant to find on a fabricated tree or graph."""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest
from benchmark_module import script_module

pytestmark = pytest.mark.smoke

REPO = Path(__file__).resolve().parents[1]


def _checker():
    return script_module("tools", "check_imports")


def test_the_repository_keeps_every_rule() -> None:
    check = _checker()
    assert check.plugin_import_findings() == []
    assert check.naming_findings() == []
    assert check.cycle_findings(grimp.build_graph("distrepro", cache_dir=None)) == []


def test_a_plugin_importing_past_the_surface_is_named_with_its_line(tmp_path: Path) -> None:
    check = _checker()
    method = tmp_path / "methods" / "m"
    method.mkdir(parents=True)
    (method / "method.py").write_text(
        "from distrepro import api\nfrom distrepro.api import Method\nimport distrepro.engine.loop\n"
        "from distrepro import metrics\n"
    )
    (tmp_path / "datasets").mkdir()
    (tmp_path / "tests" / "_support" / "plugins").mkdir(parents=True)
    found = check.plugin_import_findings(tmp_path)
    assert found == [
        "methods/m/method.py:3: imports distrepro.engine.loop; plugins import only distrepro.api",
        "methods/m/method.py:4: imports distrepro.metrics; plugins import only distrepro.api",
    ]


def test_a_cycle_is_found_and_shown_as_a_chain() -> None:
    check = _checker()
    graph = grimp.ImportGraph()
    for name in ("distrepro.a", "distrepro.b", "distrepro.c", "distrepro.d"):
        graph.add_module(name)
    graph.add_import(importer="distrepro.a", imported="distrepro.b")
    graph.add_import(importer="distrepro.b", imported="distrepro.c")
    graph.add_import(importer="distrepro.c", imported="distrepro.a")
    graph.add_import(importer="distrepro.c", imported="distrepro.d")
    (finding,) = check.cycle_findings(graph)
    assert finding.startswith("import cycle among 3 modules: distrepro.a -> distrepro.b -> distrepro.c -> distrepro.a")


def test_a_stuttering_module_name_and_a_crowded_top_level_are_found(tmp_path: Path) -> None:
    check = _checker()
    package = tmp_path / "distrepro"
    names = ("x/run.py", "y/run.py", "dist/dist_comm.py", *(f"m{i}.py" for i in range(check.MAX_TOP_LEVEL + 1)))
    for rel in names:
        (package / rel).parent.mkdir(parents=True, exist_ok=True)
        (package / rel).write_text("")
    found = check.naming_findings(tmp_path)
    assert found[0] == "distrepro/dist/dist_comm.py: the module name repeats its package's (dist/); drop the prefix"
    assert found[1].startswith(f"distrepro/ holds {check.MAX_TOP_LEVEL + 1} modules at its top level")
    assert len(found) == 2  # two engines may each have a run.py: the folder tells them apart


def test_the_layers_contract_names_every_part_of_the_package_and_lists_no_exception() -> None:
    """The one ``layers`` contract covers every subpackage and top-level module of ``distrepro`` (a new package
    cannot escape the stack by being left out; import-linter's ``exhaustive`` says so too), and no contract ignores
    an import."""
    import tomllib

    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    for contract in config["contracts"]:
        assert "ignore_imports" not in contract and "unmatched_ignore_imports_alerting" not in contract
    (layers,) = [c for c in config["contracts"] if c["type"] == "layers"]
    assert layers["containers"] == ["distrepro"] and layers["exhaustive"] is True
    named = {f"distrepro.{part.strip()}" for layer in layers["layers"] for part in layer.split("|")}
    package = REPO / "distrepro"
    parts = {f"distrepro.{p.name}" for p in package.iterdir() if (p / "__init__.py").is_file()}
    parts |= {f"distrepro.{p.stem}" for p in package.glob("*.py") if p.name != "__init__.py"}
    assert named == parts


def test_the_forbidden_contracts_back_the_architecture_pages_rules() -> None:
    """docs/architecture.md states that only orchestration calls an engine, that the report and the sensitivity sweep
    never train, and that engines are handed their run: each is a forbidden contract, so lint fails when one breaks."""
    import tomllib

    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    forbidden = {
        (source, target)
        for c in config["contracts"]
        if c["type"] == "forbidden"
        for source in c["source_modules"]
        for target in c["forbidden_modules"]
    }
    above_orchestration = ("cli", "reproduction", "report", "sensitivity", "conformance")
    assert {(f"distrepro.{s}", "distrepro.engine") for s in above_orchestration} <= forbidden
    assert {("distrepro.report", "distrepro.orchestration.campaign")} <= forbidden
    assert {("distrepro.sensitivity", "distrepro.orchestration.campaign")} <= forbidden
    assert ("distrepro.engine", "distrepro.tracking") in forbidden
