"""What ``reproduce`` says before it trains: each preparation step named while it lasts, and the estimated time."""

from __future__ import annotations

from pathlib import Path

import pytest
from slow_step import Stopped, alive_lines, captured_stderr, slow_step

import distrepro.reproduction.reproduce as reproduce_module


def test_loading_the_arms_is_named_while_it_lasts(
    paper_root: Path, mlflow_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = captured_stderr(monkeypatch)
    said = "reproduce tinypaper: loading the arms' configs, checking the store, estimating the time, opening "
    monkeypatch.setattr(reproduce_module, "_load_arms", slow_step(out, said))
    with pytest.raises(Stopped, match="seen"):
        reproduce_module.reproduce("tinypaper", root=paper_root)
    assert alive_lines(out) and all(said in line for line in alive_lines(out))
