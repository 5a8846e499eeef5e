"""The generated tests of one or more methods, as ``distrepro test METHOD`` runs them (under pytest).

The methods come from ``DISTREPRO_TEST_METHODS`` (comma-separated; :mod:`distrepro.conformance.runner` sets it),
their plugins from the roots (``--root``, ``DISTREPRO_PATH``). Each test gets a private MLflow store and a scratch
working folder; the round trip's two-node profile is added as a root of its own.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from distrepro.conformance import checks
from distrepro.plugins.roots import PATH_ENV

METHODS_ENV = "DISTREPRO_TEST_METHODS"
METHODS = [m for m in os.environ.get(METHODS_ENV, "").split(",") if m.strip()]


@pytest.fixture
def tracking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A private sqlite store; the cwd a scratch folder; the pair profile in a root of its own."""
    profiles = tmp_path / "profile_root" / "hardware_profiles"
    profiles.mkdir(parents=True)
    shutil.copyfile(checks.PAIR_PROFILE_FILE, profiles / f"{checks.PAIR_PROFILE}.yaml")
    current = os.environ.get(PATH_ENV, "")
    monkeypatch.setenv(PATH_ENV, os.pathsep.join(p for p in (current, str(profiles.parent)) if p))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return uri


@pytest.mark.parametrize("name", METHODS)
def test_smoke_campaign(name: str, tracking: str) -> None:
    checks.smoke_campaign(name, tracking)


@pytest.mark.parametrize("name", METHODS)
def test_checkpoint_round_trip(name: str, tracking: str, tmp_path: Path) -> None:
    checks.checkpoint_round_trip(name, tracking, tmp_path / "ckpt")
