"""The tracking store, checked and read with the standard library only, so the answer takes a second.

Why not ask ``MlflowClient``: importing mlflow alone takes seconds (7 s on a loaded two-core box),
and MLflow meets a dead server with about four minutes of HTTP retries and an unwritable SQLite
path with two minutes of engine retries, each ending in a traceback of a hundred lines or more. A
mistake about *where* runs go should be one line, before torch or mlflow is even imported, and
certainly before anything trains. So:

* :func:`check_store` refuses a URI scheme no MLflow store (built in or plugin) serves, probes a
  server's ``/health`` with a short timeout, and takes the write lock of a SQLite file
  (``BEGIN IMMEDIATE``), which is what fails on a read-only file or folder; where a new store or its
  folders would be made, it makes and removes a folder or file there (``os.access`` says yes to root even
  on ``/proc``); an SQLite store in memory is refused (it keeps nothing), as is a folder store that this
  MLflow would refuse, and a database store needs its driver installed and its server answering;
* :func:`first_use_lock` keeps two processes from creating a new SQLite store's tables at once.

Reading one run the same way is :mod:`distrepro.tracking.run_reader`. Store faults are
:class:`~distrepro.errors.StoreUnavailable`: one line naming the URI or the file.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import sqlite3
import ssl
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path

from distrepro.errors import StoreUnavailable

PROBE_TIMEOUT_S = 3.0  # a tracking server that needs longer than this to say "OK" is not usable
#: how long the check waits for a SQLite store's write lock: a campaign writing to the same store holds it for
#: milliseconds at a time, so a lock held longer is another program's (an open transaction in a ``sqlite3`` shell, a
#: database browser), which MLflow would wait on for most of a minute before failing with a traceback
SQLITE_LOCK_WAIT_S = 5.0
_BUILTIN_SCHEMES = frozenset({"", "file", "http", "https", "databricks", "databricks-uc", "uc"})
_DATABASES = ("postgresql", "mysql", "sqlite", "mssql")  # with or without "+driver", as MLflow accepts
_HINT = "set MLFLOW_TRACKING_URI to a store you can write (default: sqlite:///./mlflow.db)"


def sqlite_path(uri: str) -> Path | None:
    """The file of a ``sqlite:///PATH`` URI (relative to the cwd, as MLflow reads it); None otherwise."""
    prefix = "sqlite:///"
    if not uri.lower().startswith(prefix):
        return None
    text = uri[len(prefix) :].split("?", 1)[0]
    return None if text in ("", ":memory:") else Path(text)


@contextlib.contextmanager
def first_use_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on SQLite file ``path`` while MLflow opens it for the first time.

    MLflow creates and migrates a new store's tables when a client first touches it; two campaigns
    started at once on a new file both migrate, and one dies in alembic ("expected to match one
    row"). ``flock`` locks are separate from the POSIX record locks SQLite takes, so this excludes
    only other distrepro processes opening the store, for the moment it takes. A no-op where
    ``fcntl`` is missing (Windows) or the file cannot be opened (MLflow then reports the fault).
    """
    try:
        import fcntl

        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
    except (ImportError, OSError):
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the flock; SQLite holds no lock between MLflow's calls


def _migrating(path: Path) -> bool:
    """Whether another process holds :func:`first_use_lock` on ``path`` (it is creating the store's tables, which
    holds SQLite's write lock for seconds); False where ``fcntl`` is missing or the file cannot be opened."""
    try:
        import fcntl

        fd = os.open(path, os.O_RDONLY)
    except (ImportError, OSError):
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # releases the flock if it was taken
    return False


def _scheme_is_served(scheme: str) -> bool:
    s = scheme.lower()
    if s in _BUILTIN_SCHEMES or len(s) == 1:  # one letter: a Windows drive, i.e. a local folder
        return True
    if s.split("+", 1)[0] in _DATABASES:
        return True
    return any(ep.name == s for ep in entry_points(group="mlflow.tracking_store"))  # plugin stores


def check_store(uri: str) -> None:
    """Raise :class:`StoreUnavailable` (one line) if ``uri`` cannot be a working tracking store."""
    scheme = urllib.parse.urlparse(uri).scheme
    if not _scheme_is_served(scheme):
        raise StoreUnavailable(
            f"tracking URI {uri!r}: no MLflow store serves the scheme '{scheme}:'; use sqlite:///PATH, "
            "http(s)://HOST:PORT (an MLflow server), a database URI or a folder (MLFLOW_TRACKING_URI)"
        )
    low = scheme.lower()
    path = sqlite_path(uri)
    if path is not None:
        _check_sqlite(path)
    elif low == "sqlite" and uri.split("://", 1)[-1].split("?", 1)[0] in ("", "/", "/:memory:"):
        raise StoreUnavailable(
            f"tracking URI {uri!r} is an SQLite store in memory: it keeps nothing once the command ends (and MLflow "
            f"puts the artifacts in ./mlruns); {_HINT}"
        )
    elif low in ("http", "https"):
        _check_server(uri)
    elif low in ("", "file") or len(low) == 1:
        _check_folder_store(uri)
    elif low.split("+", 1)[0] in _DATABASES:
        _check_database(uri)


def _check_sqlite(path: Path) -> None:
    """Check an SQLite store without creating anything: a run refused later (a bad config) leaves no file."""
    where = f"SQLite tracking store {path}"
    folder = path.parent
    if folder.exists() and not folder.is_dir():
        raise StoreUnavailable(f"{where}: {folder} is a file, not a folder; {_HINT}")
    existing = next(p for p in (folder, *folder.parents) if p.exists())  # MLflow creates the rest
    if not existing.is_dir():
        raise StoreUnavailable(f"{where}: cannot create its folder {folder} ({existing} is a file); {_HINT}")
    if path.exists() and not path.is_file():
        raise StoreUnavailable(f"{where} is not a file; {_HINT}")
    if not os.access(existing, os.W_OK | os.X_OK):
        what = "its folder" if existing == folder else f"{existing}, where its folder {folder} would be made,"
        raise StoreUnavailable(f"{where}: {what} is not writable (SQLite writes its journal there); {_HINT}")
    if not path.exists():  # a new store: MLflow creates (folders included) and migrates it on first use
        reason = cannot_create(folder)
        if reason is not None:
            raise StoreUnavailable(f"{where}: cannot create it: {reason}; {_HINT}")
        return
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        raise StoreUnavailable(f"{where} is read-only; make it writable or {_HINT}")
    try:
        con = sqlite3.connect(path, timeout=SQLITE_LOCK_WAIT_S)
        try:
            con.execute("SELECT count(*) FROM sqlite_master").fetchone()  # reads the header: "not a database"
            con.execute("BEGIN IMMEDIATE")  # the write lock: what a read-only file or medium refuses
            con.rollback()
        finally:
            con.close()
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            if _migrating(path):
                return  # another distrepro process is creating its tables (first_use_lock): the file works
            raise StoreUnavailable(
                f"the store {path} is locked by another process (no write lock within {SQLITE_LOCK_WAIT_S:.0f} s: "
                "an open transaction in a sqlite3 shell or a database browser?); end it, or "
                f"{_HINT}"
            ) from None
        raise StoreUnavailable(f"{where}: {exc}; {_HINT}") from None
    except sqlite3.DatabaseError as exc:
        raise StoreUnavailable(f"{where}: {exc}; {_HINT}") from None


def cannot_create(folder: Path) -> str | None:
    """Why files cannot be made in ``folder`` (which MLflow creates if missing), else None.

    Tried rather than asked: ``os.access`` answers yes to root for ``/proc`` or an immutable folder, where
    the ``mkdir`` of MLflow then fails with a traceback. The probe leaves nothing behind: the outermost
    missing folder is made and removed again, or a temporary file is made and removed in an existing one.
    """
    missing = [p for p in (folder, *folder.parents) if not p.exists()]
    try:
        if missing:
            os.mkdir(missing[-1])
            with contextlib.suppress(OSError):  # another process may have put something in it since
                os.rmdir(missing[-1])
        else:
            fd, name = tempfile.mkstemp(prefix=".distrepro-probe-", dir=folder)
            os.close(fd)
            os.unlink(name)
    except FileExistsError:
        return None  # another process made it in between: it can be made
    except OSError as exc:
        return f"{exc.strerror or exc} ({exc.filename or folder})"
    return None


def _check_folder_store(uri: str) -> None:
    """A folder store (``file:``, a plain path): MLflow 3 refuses it unless asked to; its folder must be creatable."""
    parsed = urllib.parse.urlparse(uri)
    folder = Path(urllib.parse.unquote(parsed.path) if parsed.scheme.lower() == "file" else uri)
    if _file_store_gated() and os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").strip().lower() not in ("1", "true"):
        raise StoreUnavailable(
            f"tracking URI {uri!r} is a folder (MLflow's file store), which this MLflow refuses unless "
            f"MLFLOW_ALLOW_FILE_STORE=true is set; {_HINT}"
        )
    if folder.exists() and not folder.is_dir():
        raise StoreUnavailable(f"file tracking store {folder} is not a folder; {_HINT}")
    reason = cannot_create(folder)
    if reason is not None:
        raise StoreUnavailable(f"file tracking store {folder}: cannot write there: {reason}; {_HINT}")


def _file_store_gated() -> bool:
    """Whether the installed MLflow refuses a file store without ``MLFLOW_ALLOW_FILE_STORE`` (3.x does),
    read from its source so that mlflow (seconds to import) is not imported to find out."""
    spec = importlib.util.find_spec("mlflow")
    folder = Path(spec.origin).parent if spec is not None and spec.origin else None
    if folder is None:
        return False
    try:
        return "MLFLOW_ALLOW_FILE_STORE" in (folder / "store" / "tracking" / "file_store.py").read_text("utf-8")
    except OSError:
        return False


_DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306, "mssql": 1433}


def _check_database(uri: str) -> None:
    """A database store: its driver must be installed and its server must accept a connection."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        url = make_url(uri)
        shown = url.render_as_string(hide_password=True)
        url.get_dialect().import_dbapi()
    except (ArgumentError, NoSuchModuleError, ValueError) as exc:
        raise StoreUnavailable(
            f"tracking URI {uri.split('@')[-1]!r} is not a database URL SQLAlchemy reads ({exc})"
        ) from None
    except ImportError as exc:
        raise StoreUnavailable(
            f"tracking store {shown}: its database driver '{exc.name}' is not installed; pip install it, or {_HINT}"
        ) from None
    if url.host:
        port = url.port or _DEFAULT_PORTS.get(url.get_backend_name(), 0)
        try:
            socket.create_connection((url.host, port), timeout=PROBE_TIMEOUT_S).close()
        except OSError as exc:
            raise StoreUnavailable(
                f"database server {url.host}:{port} of tracking store {shown} is not reachable "
                f"({exc.strerror or exc}); start it, or {_HINT}"
            ) from None


def _check_server(uri: str) -> None:
    try:
        with urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=PROBE_TIMEOUT_S):
            return
    except urllib.error.HTTPError as exc:
        if exc.code < 500 and exc.code != 404:
            return  # it answers, behind a login or such: MLflow's own replies say more than a probe can
        reason: object = f"HTTP {exc.code} {exc.reason} for /health: is it an MLflow server?"
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, ssl.SSLError):
            return  # TLS is configured for MLflow (MLFLOW_TRACKING_SERVER_CERT_PATH, ...), not for this probe
    except ValueError:
        return  # a URL urllib cannot parse (credentials in it, ...): leave it to MLflow
    except OSError as exc:  # timeouts and resets while reading the answer
        reason = exc
    raise StoreUnavailable(
        f"MLflow tracking server {uri} is not reachable ({reason}); start it, or set MLFLOW_TRACKING_URI "
        "to a reachable store"
    )
