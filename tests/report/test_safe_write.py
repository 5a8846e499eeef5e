"""Every file the report writes goes through :mod:`distrepro.safe_write`: a symbolic link planted in ``reports/``
(absolute or relative, on the file or on a folder on the way) that leads outside is refused with one line naming
the path, before anything outside is written; a link that stays inside is followed; files are replaced whole."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_report import SYNTH_CLAIMS, synthetic_runset

from distrepro.claims.papers import PaperInfo
from distrepro.claims.schema import validate_paper
from distrepro.report.build import write_report
from distrepro.report.papers_index import write_index
from distrepro.safe_write import UnsafePath, checked, write_text


def _outside(tmp_path: Path) -> tuple[Path, Path]:
    """A folder outside ``reports/`` holding a file whose bytes must survive."""
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("keep me\n", encoding="utf-8")
    return outside, victim


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _link(link: Path, target: Path, relative: bool) -> None:
    link.symlink_to(os.path.relpath(target, link.parent) if relative else target)


@pytest.mark.parametrize("relative", [False, True], ids=["absolute", "relative"])
def test_an_index_html_link_leading_outside_is_refused_and_its_target_kept(tmp_path: Path, relative: bool) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    outside, victim = _outside(tmp_path)
    _link(reports / "index.html", victim, relative)
    before = _snapshot(outside)
    with pytest.raises(UnsafePath) as info:
        write_index(reports)
    message = str(info.value)
    assert "\n" not in message and str(reports / "index.html") in message and "symbolic link" in message
    assert _snapshot(outside) == before


@pytest.mark.parametrize("relative", [False, True], ids=["absolute", "relative"])
def test_a_figures_folder_linked_outside_gets_no_figure_and_loses_no_file(tmp_path: Path, relative: bool) -> None:
    outside, _victim = _outside(tmp_path)
    (outside / "timeline.png").write_bytes(b"not a figure of ours")  # a file a figure would overwrite, or remove
    (outside / "old.png").write_bytes(b"a png the stale-figure sweep would remove")
    out = tmp_path / "reports" / "synth"
    out.mkdir(parents=True)
    _link(out / "figures", outside, relative)
    before = _snapshot(outside)
    info = PaperInfo("synth", validate_paper(SYNTH_CLAIMS))
    with pytest.raises(UnsafePath) as raised:
        write_report(info, synthetic_runset(), out, root=tmp_path)
    assert str(out / "figures") in str(raised.value) and "\n" not in str(raised.value)
    assert _snapshot(outside) == before


@pytest.mark.parametrize("relative", [False, True], ids=["absolute", "relative"])
@pytest.mark.parametrize("product", ["report.md", "runs.csv", "claims_verdict.json"])
def test_a_report_product_linked_outside_is_refused(tmp_path: Path, relative: bool, product: str) -> None:
    outside, victim = _outside(tmp_path)
    out = tmp_path / "reports" / "synth"
    out.mkdir(parents=True)
    _link(out / product, victim, relative)
    before = _snapshot(outside)
    info = PaperInfo("synth", validate_paper(SYNTH_CLAIMS))
    with pytest.raises(UnsafePath, match=f"refusing to write {out / product}: .*outside"):
        write_report(info, synthetic_runset(), out, root=tmp_path)
    assert _snapshot(outside) == before


def test_links_that_stay_inside_are_followed_and_files_are_replaced_whole(tmp_path: Path) -> None:
    folder = tmp_path / "reports"
    (folder / "real").mkdir(parents=True)
    (folder / "alias").symlink_to("real")  # relative, inside
    (folder / "latest.md").symlink_to(folder / "real" / "file.md")  # absolute, inside, dangling for now
    assert checked(folder, folder / "alias" / "file.md") == (folder / "real" / "file.md").resolve()
    write_text(folder, folder / "alias" / "file.md", "one\n")
    write_text(folder, folder / "latest.md", "two\n")
    assert (folder / "real" / "file.md").read_text() == "two\n" and (folder / "latest.md").is_symlink()
    assert sorted(p.name for p in (folder / "real").iterdir()) == ["file.md"]  # no temporary file left
    mode = (folder / "real" / "file.md").stat().st_mode & 0o777
    plain = folder / "plain.txt"
    plain.write_text("x")
    assert mode == plain.stat().st_mode & 0o777  # the mode a plain write gives, not a temporary file's 0600
    for escape in (folder / ".." / "x", tmp_path / "elsewhere" / "x"):
        with pytest.raises(UnsafePath, match="outside"):
            write_text(folder, escape, "no")
    assert not (tmp_path / "x").exists() and not (tmp_path / "elsewhere").exists()


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(tmp_path: Path) -> None:
    from distrepro.safe_write import write_with

    (tmp_path / "a.txt").write_text("old")

    def boom(tmp: Path) -> None:
        tmp.write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        write_with(tmp_path, tmp_path / "a.txt", boom)
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"] and (tmp_path / "a.txt").read_text() == "old"


@pytest.mark.smoke
def test_what_stands_in_the_way_of_a_write_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``reports/`` that is a file, a ``runs.csv`` that is a folder, a read-only folder: each ended in an
    unexpected ``OSError``; each is one line naming the path and what is in its way."""
    from distrepro.safe_write import WriteError, make_folder, write_text

    reports = tmp_path / "reports"
    reports.write_text("not a folder\n", encoding="utf-8")
    with pytest.raises(WriteError, match=f"cannot make the folder {reports}/p: {reports} is a file, not a folder"):
        make_folder(reports / "p")
    reports.unlink()
    (reports / "p" / "runs.csv").mkdir(parents=True)
    with pytest.raises(WriteError, match=r"cannot write .*runs.csv: it is a folder"):
        write_text(reports, reports / "p" / "runs.csv", "a,b\n")

    def refused(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refused)  # as a read-only folder answers (root ignores permission bits)
    with pytest.raises(WriteError, match=r"cannot write .*index.md: .*reports is not writable \(Permission denied\)"):
        write_text(reports, reports / "index.md", "x\n")


def test_a_report_folder_that_is_a_file_or_a_product_that_is_a_folder_is_one_line(tmp_path: Path) -> None:
    """The census's cases, through the report itself: ``reports/`` a file, and ``runs.csv`` a folder."""
    from distrepro.safe_write import WriteError

    info = PaperInfo("synth", validate_paper(SYNTH_CLAIMS))
    (tmp_path / "reports").write_text("x\n", encoding="utf-8")
    with pytest.raises(WriteError, match=r"reports is a file, not a folder"):
        write_report(info, synthetic_runset(), tmp_path / "reports" / "synth")
    out = tmp_path / "out"
    (out / "runs.csv").mkdir(parents=True)
    with pytest.raises(WriteError, match=r"runs.csv: it is a folder"):
        write_report(info, synthetic_runset(), out)
