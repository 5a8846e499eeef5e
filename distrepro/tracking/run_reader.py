"""One run of the tracking store (status, params, tags), read with the standard library where it can be.

``--resume`` vets its target before torch or mlflow is imported: a SQLite file is read with ``sqlite3``, a
tracking server through MLflow's REST API; only other stores go through mlflow. Apart from
:mod:`distrepro.tracking.storeprobe` (which only checks a store) so that the MLflow client, which uses the
probe's SQLite helpers, and this reader, which falls back on the client, do not import each other.
"""

from __future__ import annotations

import json
import sqlite3
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from distrepro.errors import StoreUnavailable
from distrepro.tracking.storeprobe import PROBE_TIMEOUT_S, sqlite_path


@dataclass(frozen=True)
class StoredRun:
    """What ``--resume`` needs to know about a run."""

    run_id: str
    status: str
    lifecycle_stage: str
    params: dict[str, str]
    tags: dict[str, str]


def read_run(uri: str, run_id: str) -> StoredRun | None:
    """The run ``run_id`` in store ``uri``, or None if there is none."""
    path = sqlite_path(uri)
    if path is not None:
        return _read_sqlite_run(path, run_id)
    if urllib.parse.urlparse(uri).scheme.lower() in ("http", "https"):
        found = _read_rest_run(uri, run_id)
        if found is not False:
            return found
    return _read_client_run(uri, run_id)


def _read_sqlite_run(path: Path, run_id: str) -> StoredRun | None:
    if not path.is_file():
        return None
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=10.0)
    try:
        row = con.execute("SELECT status, lifecycle_stage FROM runs WHERE run_uuid = ?", (run_id,)).fetchone()
        if row is None:
            return None
        params = dict(con.execute("SELECT key, value FROM params WHERE run_uuid = ?", (run_id,)).fetchall())
        tags = dict(con.execute("SELECT key, value FROM tags WHERE run_uuid = ?", (run_id,)).fetchall())
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return None  # a new, empty store
        raise StoreUnavailable(f"SQLite tracking store {path}: {exc}") from None
    finally:
        con.close()
    return StoredRun(run_id, row[0], row[1], params, tags)


def _read_rest_run(uri: str, run_id: str) -> StoredRun | Literal[False] | None:
    """MLflow's REST ``runs/get``; False when the answer is not MLflow's (a login, a proxy): ask mlflow."""
    url = f"{uri.rstrip('/')}/api/2.0/mlflow/runs/get?{urllib.parse.urlencode({'run_id': run_id})}"
    try:
        with urllib.request.urlopen(url, timeout=PROBE_TIMEOUT_S * 3) as resp:
            body = json.load(resp)
    except urllib.error.HTTPError as exc:
        try:
            code = json.loads(exc.read() or b"{}").get("error_code")
        except ValueError:
            code = None
        return None if code == "RESOURCE_DOES_NOT_EXIST" else False
    except (OSError, ValueError):
        return False
    run = body.get("run") or {}
    info, data = run.get("info") or {}, run.get("data") or {}
    return StoredRun(
        run_id,
        str(info.get("status", "")),
        str(info.get("lifecycle_stage", "active")),
        {p["key"]: p.get("value", "") for p in data.get("params", [])},
        {t["key"]: t.get("value", "") for t in data.get("tags", [])},
    )


def _read_client_run(uri: str, run_id: str) -> StoredRun | None:
    from mlflow.exceptions import MlflowException

    from distrepro.tracking.mlflow_client import make_client

    try:
        run = make_client(uri).get_run(run_id)
    except MlflowException as exc:
        if exc.error_code == "RESOURCE_DOES_NOT_EXIST":
            return None
        raise
    return StoredRun(run_id, run.info.status, run.info.lifecycle_stage, dict(run.data.params), dict(run.data.tags))
