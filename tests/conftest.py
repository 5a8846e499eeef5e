"""Shared fixtures: a private MLflow store per test, few threads per process."""

from __future__ import annotations

import os

import pytest
import torch

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture
def mlflow_uri(tmp_path, monkeypatch) -> str:
    """A fresh sqlite tracking store in this test's tmp dir (never the cwd's mlflow.db)."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return uri
