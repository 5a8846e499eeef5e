"""Every citation in the repository must be one a reader can follow (issue 10).

Figures and choices are cited to their primary sources (datasheets, published benchmarks, GitHub
issues, the papers, reference code at a commit) or described as our own measurement. Nothing may
point at the project's private research write-ups, which users do not have: their file names,
section references into them, or the folder they live in (:data:`PRIVATE_NOTES` lists the forms).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Each alternative has one bracketed character so that this file does not match itself.
PRIVATE_NOTES = re.compile(
    r"share[d]/|research note[s]|the note[s]|note[s] §"
    r"|hardware_calibratio[n]|papers_cadp_cha[o]|environmen[t]\.md|anchors_harnes[s]"
    r"|paper_(?:qs[r]|aci[d]|decentd[p])\.md",
    re.IGNORECASE,
)


def _repository_files() -> list[Path]:
    """Tracked files plus untracked ones git does not ignore (a new file is checked before its commit)."""
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            check=True,
            capture_output=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    names = sorted({name for name in out.decode("utf-8").split("\0") if name})
    return [ROOT / name for name in names if (ROOT / name).is_file()]


def test_no_file_cites_the_private_research_notes() -> None:
    files = _repository_files()
    assert files, "git ls-files listed nothing"
    hits = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:  # binary files cite nothing
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            match = PRIVATE_NOTES.search(line)
            if match:
                hits.append(f"{path.relative_to(ROOT)}:{number}: {match.group(0)!r} in {line.strip()[:100]!r}")
    assert not hits, "cite the primary source instead of the private notes:\n" + "\n".join(hits)


@pytest.mark.parametrize(
    "line",
    [
        "after hardware" + "_calibration.md §6e",
        "(papers" + "_cadp_chao.md §1.8)",
        "``shared" + "/research/environ" + "ment.md`` §5",
        "(anchors" + "_harness.md §6)",
        "(`paper" + "_qsr.md` §1.4)",
        "the" + " notes' better alternative",
        "[R] (notes" + " §1.2)",
        "in the project's research" + " notes",
    ],
)
def test_the_pattern_catches_what_issue_10_removed(line: str) -> None:
    assert PRIVATE_NOTES.search(line)


@pytest.mark.parametrize(
    "line",
    [
        'notes: "FLOPS read as analytical training FLOPs"',
        "- notes: {claim.notes}",
        "NVIDIA/nccl#1127 (no GeForce P2P)",
        'camp.log_text("hello", "notes/readme.txt")',
    ],
)
def test_the_pattern_leaves_ordinary_text_alone(line: str) -> None:
    assert not PRIVATE_NOTES.search(line)
