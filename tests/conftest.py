"""Shared fixtures: a private, pre-migrated MLflow store per test; few threads per process."""

from __future__ import annotations

import os
import shutil
from importlib import metadata
from pathlib import Path

import pytest
import torch

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture(scope="session")
def migrated_mlflow_db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty, fully migrated sqlite store, built once and kept in pytest's cache between sessions.

    Migrating a new store takes seconds (more on a busy machine); copying one takes milliseconds.
    Keyed by the MLflow version (a new version may add migrations), built in a private file and
    moved into place atomically, so parallel xdist workers never see a half-migrated store.
    """
    from suite.tracking import make_client

    cache = getattr(request.config, "cache", None)
    folder = (
        Path(cache.mkdir(f"mlflow-template-{metadata.version('mlflow')}"))
        if cache is not None
        else tmp_path_factory.mktemp("mlflow_template")
    )
    db = folder / "template.db"
    if not db.exists():
        scratch = tmp_path_factory.mktemp("mlflow_build") / "template.db"
        make_client(f"sqlite:///{scratch}").search_experiments()  # creates and migrates the tables
        os.replace(shutil.copyfile(scratch, folder / f"template.{os.getpid()}.tmp"), db)
    return db


@pytest.fixture
def mlflow_uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, migrated_mlflow_db: Path) -> str:
    """A fresh, pre-migrated sqlite tracking store in this test's tmp dir (never the cwd's mlflow.db)."""
    db = tmp_path / "mlflow.db"
    shutil.copyfile(migrated_mlflow_db, db)
    uri = f"sqlite:///{db}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return uri
