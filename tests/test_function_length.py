"""The report and the run path stay readable: no function in ``distrepro/report/`` or ``distrepro/reproduction/`` is
longer than :data:`MAX_LINES` (docstring included). Long functions there once judged, drew and wrote in one body; a
step that grows past the limit is split along what it does."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.smoke

REPO = Path(__file__).resolve().parents[1]
MAX_LINES = 60
FOLDERS = ("distrepro/report", "distrepro/reproduction")


def long_functions(root: Path = REPO) -> list[str]:
    out = []
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > MAX_LINES:
                        out.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({lines} lines)")
    return out


def test_no_function_in_the_report_or_the_run_path_is_over_the_limit() -> None:
    assert long_functions() == []


def test_a_long_function_is_found(tmp_path: Path) -> None:
    folder = tmp_path / "distrepro" / "report"
    folder.mkdir(parents=True)
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    (folder / "long.py").write_text(f"def judge_draw_and_write():\n{body}\n")
    assert long_functions(tmp_path) == [f"distrepro/report/long.py:1 judge_draw_and_write ({MAX_LINES + 1} lines)"]
