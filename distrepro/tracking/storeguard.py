"""Store faults in the middle of a campaign: one line, and at once after the first.

``MlflowClient`` reports a server that went away as an ``MlflowException`` wrapping requests'
``ConnectionError`` (after its HTTP retries), and a SQLite file that became unwritable as one
wrapping SQLAlchemy's ``OperationalError``; the user sees a long traceback, and every later call
(closing the child and parent runs) waits through the retries again. :class:`GuardedClient` wraps
the client: such a fault becomes :class:`~distrepro.errors.StoreUnavailable` naming the store, and every
later call raises it at once, so cleanup does not wait minutes on a store that is gone. What was
written before the fault stays in the store; the runs stay as it last saw them (RUNNING), which is
what ``--resume`` continues. An artifact that cannot be written (a full disk) is a
:class:`~distrepro.errors.TrackingError`, without the fast-fail: the runs can still be closed.

Every other error (a bad metric name, a missing run) passes through unchanged.
"""

from __future__ import annotations

import errno
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distrepro.errors import StoreUnavailable, TrackingError

if TYPE_CHECKING:
    from mlflow import MlflowClient

_ERRNO = re.compile(r"\[Errno -?\d+\] [^'\")\]]+")
_DB_ERROR = re.compile(r"\((?:\w+\.)*(?:Operational|Database)Error\) ([^\n]+)")
#: what SQLite says of a file damaged in its middle: found only by the query that reads the damaged page
_DAMAGED = "malformed"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        cur = cur.__cause__ or cur.__context__


def _connection_error(exc: BaseException) -> BaseException | None:
    import requests
    import urllib3

    kinds = (
        requests.exceptions.ConnectionError,
        requests.exceptions.Timeout,
        requests.exceptions.RetryError,
        requests.exceptions.ChunkedEncodingError,
        urllib3.exceptions.HTTPError,
        ConnectionError,
        TimeoutError,
    )
    return next((e for e in _chain(exc) if isinstance(e, kinds)), None)


def describe_fault(exc: BaseException, uri: str) -> StoreUnavailable | None:
    """The one-line :class:`StoreUnavailable` for a store fault; None for any other error."""
    conn = _connection_error(exc)
    if conn is not None:
        found = _ERRNO.search(str(conn))
        reason = found.group(0) if found else type(conn).__name__
        return StoreUnavailable(f"MLflow tracking server {uri} stopped answering ({reason})")
    from mlflow.exceptions import MlflowException

    gone, frozen = deleted_store(uri), read_only_store(uri)
    for e in _chain(exc):
        text = str(e)
        db = _DB_ERROR.search(text)
        if (gone or frozen) is not None and (db is not None or type(e).__name__ == "OperationalError"):
            what = "was deleted" if gone is not None else "became read-only"
            return StoreUnavailable(f"tracking store {uri}: its file {what} while this command ran")
        if db is not None or type(e).__name__ in ("OperationalError", "DatabaseError"):
            detail = (db.group(1) if db else text.splitlines()[0] if text else type(e).__name__).strip()
            if _DAMAGED in detail:  # passed the probe at start: the damage is in pages only some queries read
                detail += " (the file is damaged: restore it from a copy; sqlite3's .recover may save what it holds)"
            return StoreUnavailable(f"tracking store {uri}: {detail}")
        if isinstance(e, MlflowException) and e.error_code == "TEMPORARILY_UNAVAILABLE":
            return StoreUnavailable(f"tracking store {uri}: {text.splitlines()[0] if text else 'unavailable'}")
    return None


def deleted_store(uri: str) -> Path | None:
    """The file of a SQLite store ``uri`` if it no longer exists (deleted mid-run: SQLite then reports "attempt to
    write a readonly database", which would send the user after permissions); None otherwise."""
    from distrepro.tracking.storeprobe import sqlite_path

    path = sqlite_path(uri)
    return path if path is not None and not path.exists() else None


def read_only_store(uri: str) -> Path | None:
    """The file of a SQLite store ``uri`` if it exists but cannot be opened for writing now (made read-only or
    immutable mid-run: SQLite then says "disk I/O error"); None otherwise. Tried, not asked: ``os.access`` says
    yes to root for an immutable file."""
    from distrepro.tracking.storeprobe import sqlite_path

    path = sqlite_path(uri)
    if path is None or not path.is_file():
        return None
    try:
        with path.open("r+b"):
            return None
    except OSError:
        return path


def after_the_fault(uri: str, resume: str) -> str:
    """What is left after a store fault mid-run, and what to do: ``resume`` is the command(s) that continue.

    A store whose file was deleted kept nothing: there is nothing to resume, only to start again."""
    gone = deleted_store(uri)
    if gone is not None:
        return f"what was logged in it went with the file: restore the file from a copy to {resume}, or start again"
    return f"what was logged before it is kept: once the store is back, continue with {resume}"


#: what an artifact write says when the disk (or the user's quota on it) is full
_DISK_FULL = {errno.ENOSPC, errno.EDQUOT}


class GuardedClient:
    """An ``MlflowClient`` (every attribute is the client's) whose store faults are one line.

    Not a subclass: it forwards, so each call can be guarded without knowing the client's methods.
    """

    def __init__(self, client: MlflowClient, uri: str) -> None:
        self._client = client
        self._uri = uri
        self.unavailable: StoreUnavailable | None = None  # the first fault; later calls raise it at once

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_client", "_uri", "unavailable"):
            raise AttributeError(name)
        attr = getattr(self._client, name)
        if name.startswith("_") or not callable(attr):
            return attr
        return self._guard(name, attr)

    def _guard(self, name: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def guarded(*args: Any, **kwargs: Any) -> Any:
            if self.unavailable is not None:
                raise StoreUnavailable(str(self.unavailable))
            try:
                return call(*args, **kwargs)
            except StoreUnavailable:
                raise
            except Exception as exc:
                fault = describe_fault(exc, self._uri)
                if fault is not None:
                    self.unavailable = fault
                    raise fault from exc
                if isinstance(exc, OSError) and exc.errno in _DISK_FULL and name.startswith("log_"):
                    # nothing more can be written there: later calls fail at once, and the campaign says how to
                    # resume once there is room, as for a full database
                    self.unavailable = StoreUnavailable(
                        f"tracking store {self._uri}: cannot write an artifact: its disk is full ({exc.strerror})"
                    )
                    raise self.unavailable from exc
                if isinstance(exc, OSError) and name.startswith("log_"):
                    raise TrackingError(f"tracking store {self._uri}: cannot write an artifact ({exc})") from exc
                raise

        guarded.__name__ = name
        return guarded
