"""``pytest -m smoke`` stays the broad subset that docs/reference.md promises in under two minutes.

Broad: every test folder (one per package of distrepro) holds smoke tests, so a change anywhere meets one. Fast is
a matter of which tests carry the mark (well under a second of CPU each: docs/contributing.md), which no test can
time on a shared machine; the tests that start fresh interpreters or run whole reproductions stay out of it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
SMOKE = re.compile(r"^\s*(@pytest\.mark\.smoke\b|pytestmark\s*=.*\bpytest\.mark\.smoke\b)", re.M)

pytestmark = pytest.mark.smoke


def _smoke_files(folder: Path) -> list[Path]:
    return [p for p in sorted(folder.glob("test_*.py")) if SMOKE.search(p.read_text(encoding="utf-8"))]


def test_every_test_folder_holds_smoke_tests() -> None:
    folders = [p for p in sorted(TESTS.iterdir()) if p.is_dir() and not p.name.startswith(("_", "."))]
    assert len(folders) >= 15, folders
    bare = [f.name for f in folders if not _smoke_files(f)]
    assert not bare, f"test folders without a smoke test: {bare}"
    assert _smoke_files(TESTS), "no top-level test module is smoke"
