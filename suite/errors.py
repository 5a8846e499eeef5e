"""User-facing errors.

Every problem a user can cause (a bad config, profile, dataset path, plugin) is reported as a
:class:`DistreproError` that names the file and the field, so the CLI can print one clear line
instead of a traceback from deep inside pydantic, yaml or torch.
"""

from __future__ import annotations

from pathlib import Path


class DistreproError(Exception):
    """Base class of errors that the CLI prints without a traceback."""


class ConfigError(DistreproError):
    """A value in a user-supplied file (run config, hardware profile, paper.yaml, ...) is wrong.

    ``source`` is the file (or another origin such as ``"--set"``); ``field`` is a dotted path
    to the offending entry (``"devices[1].count"``).
    """

    def __init__(self, source: str | Path | None, field: str | None, message: str) -> None:
        self.source = str(source) if source is not None else None
        self.field = field
        self.message = message
        where = self.source or "<config>"
        if field:
            where = f"{where}: field '{field}'"
        super().__init__(f"{where}: {message}")


class PluginError(DistreproError):
    """A method, dataset or profile plugin could not be found or loaded."""


class CommError(DistreproError, RuntimeError):
    """A method used ``Comm`` inconsistently (mismatched collectives, a finished peer, zero weights)."""


class DeadlockError(DistreproError):
    """Workers wait on each other and none can proceed (a method bug, reported with who waits on what)."""


class TrackingError(DistreproError):
    """The tracking store refused something in a way the user has to fix (e.g. deleted experiment)."""


class StoreUnavailable(TrackingError):
    """The tracking store cannot be reached, opened or written (server down, read-only file, bad URI).

    Nothing more can be logged, so nothing is retried or closed after it: code that cleans up
    runs skips the store when it sees this error, and the runs stay as the store last saw them
    (a later ``--resume`` continues them).
    """


class WorkerFailure(DistreproError):
    """A worker raised or died; carries the rank so the message can name it."""

    def __init__(self, rank: int, message: str) -> None:
        self.rank = rank
        super().__init__(f"worker rank {rank} failed: {message}")


def format_pydantic_error(source: str | Path | None, exc: Exception) -> ConfigError:
    """Turn a ``pydantic.ValidationError`` into a :class:`ConfigError` naming the first bad field."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        items = errors()
        if items:
            first = items[0]
            loc = first.get("loc", ())
            field = ""
            for part in loc:
                if isinstance(part, int):
                    field += f"[{part}]"
                else:
                    field += ("." if field else "") + str(part)
            msg = first.get("msg", str(exc))
            extra = f" (and {len(items) - 1} more problem(s))" if len(items) > 1 else ""
            return ConfigError(source, field or None, f"{msg}{extra}")
    return ConfigError(source, None, str(exc))
