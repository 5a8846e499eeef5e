"""MLflow's and SQLAlchemy's log of a store fault: held back, shown only under ``--debug``.

Why: when a SQLite store becomes unwritable mid-run (a full disk, a file made read-only, the file deleted),
MLflow's SQL store logs each failed call with ``_logger.exception`` (``mlflow.store.db.utils``: "SQLAlchemy
database error. The following exception is caught.") before it raises: about ninety lines of SQLAlchemy
traceback on stderr, ahead of distrepro's own one line (:mod:`distrepro.tracking.storeguard`), which says all
a user can act on. The exception itself still reaches distrepro, so nothing is lost by holding the log back.

What is held: records of MLflow's store modules (``mlflow.store.*``), of SQLAlchemy and of alembic, and any
MLflow record that carries a traceback. Every other MLflow line (a warning about a param, a deprecation) still
shows. Held records go to a small ring buffer (:func:`held_back`), not to the terminal; with ``--debug``
(``DISTREPRO_DEBUG=1``, inherited by pool workers and ranks) nothing is held and MLflow logs as it always does.

MLflow configures its loggers when it is imported (one shared stream handler on ``mlflow``, ``sqlalchemy.engine``
and ``alembic``, not propagating), so :func:`hold_back_store_logs` is called after that import, in every process
that opens a client (:func:`distrepro.tracking.mlflow_client.make_client`); it is idempotent.
"""

from __future__ import annotations

import logging
import os
from collections import deque

#: the newest records held back (a fault repeats the same record on every call after it: the first few suffice)
HELD_MAX = 200
_STORE_LOGGERS = ("mlflow.store", "sqlalchemy", "alembic")
#: the loggers MLflow gives its stream handler (mlflow/utils/logging_utils.py, ``_configure_mlflow_loggers``)
_MLFLOW_CONFIGURED = ("mlflow", "sqlalchemy.engine", "alembic")

_held: deque[logging.LogRecord] = deque(maxlen=HELD_MAX)


def from_the_store(record: logging.LogRecord) -> bool:
    """Whether ``record`` is the store's internal chatter: its SQL layer's, or an MLflow record with a traceback."""
    name = record.name
    in_store = any(name == prefix or name.startswith(prefix + ".") for prefix in _STORE_LOGGERS)
    return in_store or (record.exc_info is not None and (name == "mlflow" or name.startswith("mlflow.")))


class HoldBack(logging.Filter):
    """A handler filter: the store's records go to the ring buffer instead of the handler's stream."""

    def filter(self, record: logging.LogRecord) -> bool:
        if from_the_store(record):
            _held.append(record)
            return False
        return True


class _Holder(logging.Handler):
    """For SQLAlchemy's loggers that MLflow does not configure (``sqlalchemy.pool``): without a handler their
    warnings would reach Python's last-resort handler, i.e. stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        _held.append(record)


def debugging() -> bool:
    """``--debug`` (the CLI sets ``DISTREPRO_DEBUG=1``, which every worker inherits)."""
    return os.environ.get("DISTREPRO_DEBUG", "").strip() not in ("", "0")


def hold_back_store_logs() -> None:
    """Hold the store's log records back from stderr in this process (not under ``--debug``); idempotent."""
    if debugging():
        return
    for name in _MLFLOW_CONFIGURED:
        for handler in logging.getLogger(name).handlers:
            if not any(isinstance(f, HoldBack) for f in handler.filters):
                handler.addFilter(HoldBack())
    sqlalchemy = logging.getLogger("sqlalchemy")
    if not any(isinstance(h, _Holder) for h in sqlalchemy.handlers):
        sqlalchemy.addHandler(_Holder())
        sqlalchemy.propagate = False


def held_back() -> list[logging.LogRecord]:
    """The records held back so far in this process, oldest first (at most :data:`HELD_MAX`)."""
    return list(_held)
