"""The command line is the only place that knows ``argparse``: orchestration and the layers below receive typed
values (an ``ExecutorSpec``, ``RunOptions``, seeds as ints, parsed overrides), so they can be called from code
without faking a namespace of flags. The one exception is a process entry point with its own ``main(argv)``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.smoke

PACKAGE = Path(__file__).resolve().parents[1] / "distrepro"
#: process entry points that parse their own argv (a rank of the torch.distributed engine)
ALLOWED = {Path("engine/multiprocess/worker.py")}


def _imports_argparse(path: Path) -> list[int]:
    """Lines of ``path`` that import argparse, lazy imports included."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        if any(name.split(".")[0] == "argparse" for name in names):
            lines.append(node.lineno)
    return lines


def test_no_module_outside_cli_imports_argparse() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).parts[0] != "cli" and path.relative_to(PACKAGE) not in ALLOWED
        for line in _imports_argparse(path)
    ]
    assert found == [], f"argparse outside distrepro/cli: {found}"


def test_the_scan_sees_an_import_of_argparse(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from argparse import Namespace\n\nimport argparse as ap\n", encoding="utf-8")
    assert sorted(_imports_argparse(module)) == [2, 4]
