"""Provenance facts must be right, or a run cannot be traced back to the code that produced it."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from importlib import metadata
from pathlib import Path

import pytest

from distrepro.tracking.provenance import git_info, host_info, versions


@pytest.fixture
def isolated_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Keep the user's git config out, and stop git from finding a repository above ``tmp_path``."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    return tmp_path


def _git(repo: Path, *args: str) -> str:
    cfg = ["-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "commit.gpgsign=false"]
    out = subprocess.run(["git", *cfg, "-C", str(repo), *args], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def _make_repo(path: Path) -> str:
    """A repo with one commit on branch ``main``; returns the commit id."""
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "-q", "-b", "main")
    (path / "a.txt").write_text("one\n")
    _git(path, "add", "a.txt")
    _git(path, "commit", "-q", "-m", "init")
    return _git(path, "rev-parse", "HEAD")


@pytest.mark.smoke
def test_git_info_outside_git_is_unknown(isolated_git: Path) -> None:
    plain = isolated_git / "plain"
    plain.mkdir()
    assert git_info(plain) == {"commit": "unknown", "dirty": "unknown", "branch": "unknown"}


@pytest.mark.smoke
def test_git_info_clean_then_dirty(isolated_git: Path) -> None:
    repo = isolated_git / "repo"
    head = _make_repo(repo)
    assert len(head) == 40

    clean = git_info(repo)
    assert clean == {"commit": head, "dirty": "false", "branch": "main"}

    (repo / "a.txt").write_text("two\n")  # modified tracked file
    assert git_info(repo) == {"commit": head, "dirty": "true", "branch": "main"}

    # a subdirectory resolves to the same work tree
    (repo / "sub").mkdir()
    assert git_info(repo / "sub")["commit"] == head


@pytest.mark.smoke
def test_untracked_file_counts_as_dirty_but_ignored_does_not(isolated_git: Path) -> None:
    repo = isolated_git / "repo"
    _make_repo(repo)
    (repo / ".gitignore").write_text("*.db\n")
    _git(repo, "add", ".gitignore")
    _git(repo, "commit", "-q", "-m", "ignore")
    (repo / "mlflow.db").write_text("x")
    assert git_info(repo)["dirty"] == "false"
    (repo / "new_method.py").write_text("x = 1\n")
    assert git_info(repo)["dirty"] == "true"


def test_what_the_suite_writes_under_reports_does_not_make_the_tree_dirty(isolated_git: Path) -> None:
    """A reproduction rewrites reports/<paper>/ (Decent-DP's tracked fig6.csv): the next run of that checkout is
    still on clean code; an edit anywhere else, or a new file in a folder named reports deeper down, is not."""
    repo = isolated_git / "repo"
    _make_repo(repo)
    (repo / "reports" / "decentdp").mkdir(parents=True)
    (repo / "reports" / "decentdp" / "fig6.csv").write_text("a\n")
    _git(repo, "add", "reports")
    _git(repo, "commit", "-q", "-m", "grid")
    (repo / "reports" / "decentdp" / "fig6.csv").write_text("b\n")
    (repo / "reports" / "qsr").mkdir()
    (repo / "reports" / "qsr" / "report.md").write_text("x\n")
    assert git_info(repo)["dirty"] == "false"
    assert git_info(repo / "reports")["dirty"] == "false"
    (repo / "methods" / "reports").mkdir(parents=True)
    (repo / "methods" / "reports" / "new.py").write_text("x = 1\n")
    assert git_info(repo)["dirty"] == "true"


@pytest.mark.smoke
def test_git_status_leaves_index_untouched(isolated_git: Path) -> None:
    """git_info must not rewrite .git/index (no lock taken while someone else commits)."""
    repo = isolated_git / "repo"
    _make_repo(repo)
    index = repo / ".git" / "index"
    (repo / "a.txt").touch()  # stat change that a normal `git status` would write back
    before = index.stat().st_mtime_ns, index.read_bytes()
    git_info(repo)
    assert (index.stat().st_mtime_ns, index.read_bytes()) == before


@pytest.mark.smoke
def test_detached_head(isolated_git: Path) -> None:
    repo = isolated_git / "repo"
    head = _make_repo(repo)
    _git(repo, "checkout", "-q", "--detach")
    assert git_info(repo) == {"commit": head, "dirty": "false", "branch": "detached"}


@pytest.mark.smoke
def test_versions_match_installed_metadata() -> None:
    v = versions()
    assert v["python"] == platform.python_version()
    assert v["mlflow"] == metadata.version("mlflow") == "3.17.2"
    assert v["torch"] == metadata.version("torch")
    assert v["numpy"] == metadata.version("numpy")
    assert v["distrepro"]  # installed dist or distrepro.__version__
    if "torchvision" in v:
        assert v["torchvision"] == metadata.version("torchvision")
    v["python"] = "mutated"  # callers get a copy; the cache is not poisoned
    assert versions()["python"] == platform.python_version()


@pytest.mark.smoke
def test_host_info_fields() -> None:
    import torch

    h = host_info()
    assert h["hostname"] == socket.gethostname()
    assert int(h["cpu_count"]) == os.cpu_count()
    assert 1 <= int(h["cpu_usable"]) <= int(h["cpu_count"])
    assert h["platform"] == platform.platform()
    assert h["cuda_available"] == ("true" if torch.cuda.is_available() else "false")
    if torch.cuda.is_available():
        assert h["cuda_device"] == torch.cuda.get_device_name(0)
    else:
        assert h["cuda_device"] == "none"
    assert all(isinstance(v, str) for v in h.values())
