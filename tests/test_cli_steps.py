"""A command's slow first step (opening the store, loading torch and MLflow, reading the papers' reports) is named
by a heartbeat while it lasts: a fake slow step waits until the line has appeared (no timing asserted)."""

from __future__ import annotations

from pathlib import Path

import pytest
from slow_step import alive_lines, captured_stderr, slow_step

from distrepro.cli import main


@pytest.fixture
def tracking(mlflow_uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The test's private store; the cwd is a scratch folder (the report's and RESULTS.md's files go there)."""
    monkeypatch.chdir(tmp_path)
    return mlflow_uri


@pytest.mark.parametrize(
    ("argv", "patched", "said"),
    [
        (
            ["reproduce", "cadp", "--no-progress"],
            "distrepro.tracking.storeprobe.check_store",
            "reproduce cadp: opening",
        ),
        (
            ["report", "cadp", "--no-log", "--out", "r"],
            "distrepro.tracking.storeprobe.check_store",
            "report for cadp: op",
        ),
        (["results", "--out", "R.md"], "distrepro.report.results_file.latest_results", "results: reading each paper's"),
    ],
)
def test_a_commands_slow_first_step_is_named_while_it_lasts(
    tracking: str, monkeypatch: pytest.MonkeyPatch, argv: list[str], patched: str, said: str
) -> None:
    """A fake slow step (the store's check, a paper's reports read) waits until the heartbeat has named it."""
    out = captured_stderr(monkeypatch)
    monkeypatch.setattr(patched, slow_step(out, said))
    assert main(argv) == 2
    assert "distrepro: error: stopped by the test (seen: " in out.getvalue()
    assert said in alive_lines(out)[-1], out.getvalue()[-2000:]
