"""tests/_support/zygote_share.py: where a run's shared zygotes live, and that a TMPDIR too deep for a socket leaves
each test process to start its own zygote rather than fail (nox sets TMPDIR inside the checkout: CI's clone made
every shared socket path too long for AF_UNIX, and every command a test started failed)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import zygote_share

pytestmark = pytest.mark.smoke


def test_outside_xdist_nothing_is_shared(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(zygote_share.RUN_ENV, raising=False)
    assert zygote_share.run_folder() is None and zygote_share.zygote_of_the_run({}) is None


def test_a_run_folder_leaves_room_for_its_sockets(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    base = tmp_path / "clone" / ".nox" / "tests" / "tmp"  # where nox puts TMPDIR: inside the checkout
    monkeypatch.setenv(zygote_share.RUN_ENV, "4b092cd788df4c9a8727b250fd81c943")
    monkeypatch.setattr(tempfile, "tempdir", str(base))
    folder = zygote_share.run_folder()
    assert folder is not None and folder.parent == base
    socket = folder / ("k" * zygote_share.KEY_CHARS) / "socket"
    assert len(str(socket)) - len(str(base)) <= 45, socket  # the run id and the key are cut short


def test_a_tmpdir_too_deep_for_a_socket_shares_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 90)
    deep.mkdir()
    monkeypatch.setenv(zygote_share.RUN_ENV, "4b092cd788df4c9a8727b250fd81c943")
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    assert zygote_share.zygote_of_the_run({"PATH": "/usr/bin"}) is None
    assert list(deep.iterdir()) == []  # nothing made, nothing started
