"""A report reads its runs' artifacts where a local store keeps them, and downloads only what it cannot find there."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from distrepro.claims.runs import RunSet
from distrepro.report.artifact_files import LocalFirst, artifact_folders, read_locally


def _store(tmp_path: Path, uris: dict[str, str]) -> str:
    """A SQLite file with MLflow's ``runs`` table (the two columns read) and the given artifact URIs."""
    db = tmp_path / "mlflow.db"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE runs (run_uuid TEXT, artifact_uri TEXT, status TEXT)")
        con.executemany("INSERT INTO runs VALUES (?, ?, 'FINISHED')", list(uris.items()))
    return f"sqlite:///{db}"


def _runset(uri: str) -> RunSet:
    empty = pd.DataFrame()
    return RunSet("distrepro/x", uri, empty, empty, empty)


@pytest.mark.smoke
def test_artifacts_are_read_from_each_runs_local_folder(tmp_path: Path) -> None:
    local, remote = tmp_path / "a" / "artifacts", "s3://bucket/b/artifacts"
    local.mkdir(parents=True)
    (local / "config.resolved.yaml").write_text("method: ar_sgd\n", encoding="utf-8")
    uri = _store(tmp_path, {"a": str(local), "f": f"file://{local}", "b": remote})
    assert artifact_folders(uri) == {"a": local, "f": local}  # the remote root is left to MLflow
    rs = _runset(uri)
    read_locally(rs)
    assert isinstance(rs.artifacts, LocalFirst)
    assert rs.artifact_text("a", "config.resolved.yaml") == "method: ar_sgd\n"
    assert rs.artifact_text("f", "config.resolved.yaml") == "method: ar_sgd\n"
    # not found locally, and no client to download it with: absent, as before
    assert rs.artifact_text("a", "timeline.csv") is None
    assert rs.artifact_text("b", "config.resolved.yaml") is None
    assert rs.artifact_text("a", "../a/artifacts/config.resolved.yaml") is None  # nothing outside the run's folder


@pytest.mark.smoke
def test_any_other_store_keeps_the_download(tmp_path: Path) -> None:
    for uri in ("http://localhost:5000", f"sqlite:///{tmp_path / 'missing.db'}"):
        rs = _runset(uri)
        read_locally(rs)
        assert type(rs.artifacts) is dict
    (tmp_path / "other.db").write_bytes(b"not a database at all, but long enough to be read as one" * 20)
    assert artifact_folders(f"sqlite:///{tmp_path / 'other.db'}") == {}


def test_the_text_read_locally_is_mlflows_download(tmp_path: Path) -> None:
    from distrepro.tracking.mlflow_client import ensure_experiment, make_client

    uri = f"sqlite:///{tmp_path / 'store.db'}"
    client = make_client(uri)
    exp = ensure_experiment(client, "distrepro/x", str(tmp_path / "mlartifacts"))
    run = client.create_run(exp)
    text = "rank,kind,start_s,end_s,step\n0,compute,0.0,1.5,1\r\n1,comm,1.5,2.0,1\n"
    client.log_text(run.info.run_id, text, "timeline.csv")
    downloaded = RunSet("distrepro/x", uri, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), client=client)
    local = RunSet("distrepro/x", uri, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), client=None)
    read_locally(local)
    mine = local.artifact_text(run.info.run_id, "timeline.csv")
    assert mine is not None and mine == downloaded.artifact_text(run.info.run_id, "timeline.csv")
