"""No user-facing document names an internal issue number ("issue 23", "#24"): a reader outside the project cannot
look them up, so a section says what changed instead. External references keep their repository
(``NVIDIA/nccl#1127``), which this check lets through."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
INTERNAL = re.compile(r"\b[Ii]ssues?[ -]\d+|(?<![\w/.-])#\d+\b")

pytestmark = pytest.mark.smoke


def user_facing_documents() -> list[Path]:
    """The READMEs, BENCHMARKS, RESULTS, CHANGELOG, CONTRIBUTING, every page under docs/, and each paper's claims
    and configs (their notes and ``post_hoc`` lines are printed in the reports)."""
    patterns = (
        "*.md",
        "*/README.md",
        "methods/*/README.md",
        "docs/**/*.md",
        "methods/*/paper.yaml",
        "methods/*/configs/*.yaml",
    )
    return sorted({path for pattern in patterns for path in REPO.glob(pattern)})


def test_the_documents_checked_include_the_main_ones() -> None:
    names = {p.relative_to(REPO).as_posix() for p in user_facing_documents()}
    assert {
        "README.md",
        "BENCHMARKS.md",
        "RESULTS.md",
        "reports/README.md",
        "docs/claims.md",
        "methods/qsr/paper.yaml",
    } <= names


@pytest.mark.parametrize("doc", user_facing_documents(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_no_internal_issue_numbers(doc: Path) -> None:
    hits = [
        f"{doc.relative_to(REPO)}:{n}: {m[0]!r} in {line.strip()[:100]!r}"
        for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1)
        for m in INTERNAL.finditer(line)
    ]
    assert not hits, "say what changed instead of the issue number:\n" + "\n".join(hits)
