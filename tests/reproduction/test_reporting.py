"""The reproduction's report stage: each step printed as it starts, and a heartbeat that repeats it with its count."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from slow_step import Stopped, alive_lines, captured_stderr, slow_step

import distrepro.reproduction.reporting as reporting
from distrepro.report import stage


def test_the_report_stage_names_its_steps_with_their_counts(paper_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake report whose judging is slow: its line as it starts, then heartbeats with the count done so far."""
    out = captured_stderr(monkeypatch)
    wait = slow_step(out, "report for tinypaper: step 3 of 7, judging 2 claims, at proxy: 1 of 2 claims done")

    def slow_report(paper: str, **kwargs: Any) -> None:
        stage.enter("judging", "2 claims")
        stage.count("at proxy", 2, unit="claim")
        stage.advance()
        wait()

    monkeypatch.setattr(reporting, "build_report", slow_report)
    with pytest.raises(Stopped, match="seen"):
        reporting.report_reproduction("tinypaper", [], {}, "proxy", "sqlite://", paper_root, False, None, False)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("[report for tinypaper 0:") and lines[1].startswith("[report for tinypaper 0:")
    assert lines[0].endswith("] step 3 of 7, judging 2 claims")
    assert lines[1].endswith("] step 3 of 7, judging 2 claims, at proxy")
    assert alive_lines(out) and stage.describe() == ""  # the stage's tracker is the silent one again
