"""RESULTS.md checked against the checkout: the committed file, ``results --check``, one line per paper and input."""

from __future__ import annotations

from pathlib import Path

from tiny_paper import own_profiles

from distrepro.cli import main
from distrepro.report.results_check import REGENERATE, check_results
from distrepro.report.results_file import paper_section

REPO = Path(__file__).resolve().parents[2]


def test_the_committed_results_file_matches_every_papers_inputs() -> None:
    """A changed paper.yaml or arm config makes the committed verdicts describe other code: regenerate them. A section
    written before inputs were frozen (no ``frozen-inputs`` mark) is a warning until the file is regenerated; a
    section with the mark fails when any frozen input changed."""
    import warnings

    problems, unfrozen = check_results((REPO / "RESULTS.md").read_text(encoding="utf-8"))
    for line in unfrozen:
        warnings.warn(f"RESULTS.md: {line}", stacklevel=1)
    assert not problems, (
        "RESULTS.md is stale:\n  " + "\n  ".join(problems) + "\nre-run the changed papers "
        f"(`distrepro reproduce PAPER`), then regenerate it from their store: `{REGENERATE}`"
    )


def test_the_check_flag_exits_1_on_a_stale_file(paper_root: Path, tmp_path: Path, capsys) -> None:
    stale = tmp_path / "R.md"
    stale.write_text("<!-- inputs paper=tinypaper digest=000000000000 -->\n")
    assert main(["results", "--check", "--out", str(stale)]) == 1
    assert "R.md is stale: tinypaper: inputs 000000000000 recorded" in capsys.readouterr().out


def test_check_fails_per_frozen_input_and_warns_on_a_section_made_before_inputs_were_frozen(
    paper_root: Path, tmp_path: Path, capsys
) -> None:
    """Narrowing a profile's range is caught (the old digest covered only paper.yaml and the configs), one line per
    paper and input; a section without the frozen-inputs mark, as the committed file's, only warns."""
    from distrepro.claims.papers import find_paper
    from distrepro.report.results_inputs import inputs_digest

    digest = inputs_digest(find_paper("tinypaper", paper_root), paper_root)
    marked = "\n".join(paper_section("tinypaper", "Tiny", digest, {}, paper_root))
    assert "<!-- frozen-inputs paper=tinypaper paper.yaml=" in marked and "hardware-profiles=" in marked
    older = "\n".join(line for line in marked.splitlines() if "frozen-inputs" not in line)
    assert check_results(marked, paper_root) == ([], [])

    profile = own_profiles(paper_root) / "hetero-2fast-2slow.yaml"
    profile.write_text(profile.read_text() + "\n# bandwidth range narrowed\n")
    problems, warnings = check_results(marked, paper_root)
    assert warnings == [] and len(problems) == 1
    assert problems[0].startswith("tinypaper: hardware profiles changed since the runs reported here"), problems
    problems, warnings = check_results(older, paper_root)
    assert problems == [] and "made before inputs were frozen" in warnings[0]

    out = tmp_path / "R.md"
    out.write_text(marked)
    assert main(["results", "--check", "--out", str(out)]) == 1
    assert "R.md is stale: tinypaper: hardware profiles changed" in capsys.readouterr().out
    out.write_text(older)
    assert main(["results", "--check", "--out", str(out)]) == 0
    assert "warning: " in capsys.readouterr().out
