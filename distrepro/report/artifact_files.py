"""A report's run artifacts read straight from a local store's folders, not downloaded through MLflow one at a time.

Why: a report reads one artifact per re-timed run (``config.resolved.yaml``, to rebuild its job) and a few more (the
timelines, the methods' READMEs). Through MLflow each is a download: the run fetched from the store with all its
metrics, the artifact repository resolved, the file copied to a temporary folder and read back; about 30 ms each,
seconds for a paper of 90 runs. With a SQLite store whose artifacts live in local folders (``distrepro``'s default,
``mlartifacts/`` beside the database) the file is right there: one query gives every run's artifact folder, and the
file is read where it lies. The text is the same either way (the download is a copy of that file).

:func:`read_locally` puts a :class:`LocalFirst` in place of the run set's artifact cache
(:attr:`distrepro.claims.runs.RunSet.artifacts`), which :meth:`~distrepro.claims.runs.RunSet.artifact_text` consults
first: an artifact found locally is read there; anything else (another store, a remote artifact root, a missing
file) is left to the download as before.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from distrepro.tracking.storeprobe import sqlite_path


def _folder(uri: str | None) -> Path | None:
    """The local folder of an artifact URI (a path, or ``file://``), None for anything else."""
    if not uri:
        return None
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    return Path(uri) if parsed.scheme == "" and uri.startswith("/") else None


def artifact_folders(tracking_uri: str) -> dict[str, Path]:
    """Run id -> its local artifact folder, read in one query from a SQLite store (empty for any other store, or a
    store this cannot read: the caller then downloads through MLflow)."""
    path = sqlite_path(tracking_uri)
    if path is None or not path.is_file():
        return {}
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            rows = db.execute("SELECT run_uuid, artifact_uri FROM runs").fetchall()
    except sqlite3.Error:  # another schema, a locked or broken file: MLflow's own reader decides
        return {}
    return {run_id: folder for run_id, uri in rows if (folder := _folder(uri)) is not None}


class LocalFirst(dict[tuple[str, str], "str | None"]):
    """A run set's artifact cache that, asked whether it holds ``(run id, path)``, first looks for the file in the
    run's local artifact folder and keeps its text; a file it does not find stays unknown (downloaded as before)."""

    def __init__(self, folders: dict[str, Path], known: dict[tuple[str, str], str | None] | None = None) -> None:
        super().__init__(known or {})
        self._folders = folders

    def __contains__(self, key: object) -> bool:
        if dict.__contains__(self, key):
            return True
        if not (isinstance(key, tuple) and len(key) == 2):
            return False
        run_id, name = key
        folder = self._folders.get(run_id)
        if folder is None or Path(name).is_absolute() or ".." in Path(name).parts:
            return False
        file = folder / name
        try:
            text = file.read_text(encoding="utf-8") if file.is_file() else None
        except (OSError, UnicodeDecodeError):
            return False
        if text is None:
            return False
        self[key] = text
        return True


def read_locally(rs: Any) -> None:
    """Make ``rs`` (a :class:`~distrepro.claims.runs.RunSet`) read its artifacts from their local folders where it
    can (every run set made from it with :func:`dataclasses.replace` shares the cache, hence this too)."""
    folders = artifact_folders(rs.tracking_uri)
    if folders:
        rs.artifacts = LocalFirst(folders, rs.artifacts)
