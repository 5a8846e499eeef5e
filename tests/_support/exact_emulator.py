"""An emulator without error, for tests of how verdicts are shown (fixture ``exact_emulator``)."""

from __future__ import annotations

from typing import Any

import pytest

from distrepro.hardware.emulator_error import ErrorBand


def make_emulator_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every arm's emulated time without error and its band covered by the validation: for tests of how verdicts
    are shown, whose hand-built runs (methods that are no plugin, one profile) the emulator's error bands would
    otherwise make INCONCLUSIVE (that rule: tests/claims/test_model_interval.py, tests/claims/test_attribution.py)."""
    from distrepro.claims import model_interval

    def exact(spec: Any, paper: str, verdict: Any) -> dict[str, ErrorBand]:
        return {name: ErrorBand(0.0, 0.0, "exact (test)", True) for name in verdict.arm_profiles}

    monkeypatch.setattr(model_interval, "arm_bands", exact)


@pytest.fixture
def exact_emulator(monkeypatch: pytest.MonkeyPatch) -> None:
    """:func:`make_emulator_exact` for one test."""
    make_emulator_exact(monkeypatch)
