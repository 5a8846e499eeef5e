"""User-facing errors.

Every problem a user can cause (a bad config, profile, dataset path, plugin) is reported as a
:class:`DistreproError` that names the file and the field, so the CLI can print one clear line
instead of a traceback from deep inside pydantic, yaml or torch.
"""

from __future__ import annotations

import re
import signal
import traceback
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def close_matches(name: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """The ``choices`` closest to ``name`` (:func:`difflib.get_close_matches`, compared case-insensitively), best
    first: what a one-letter slip or a wrong case was meant to be."""
    import difflib

    by_lower: dict[str, str] = {}
    for choice in choices:
        by_lower.setdefault(choice.lower(), choice)
    return [by_lower[m] for m in difflib.get_close_matches(name.lower(), list(by_lower), n=n, cutoff=0.6)]


def did_you_mean(name: str, choices: Iterable[str], n: int = 3) -> str:
    """``; did you mean 'chao'?`` (or ``'a' or 'b'``) to follow an "unknown NAME" message, else the empty string."""
    found = close_matches(name, choices, n)
    if not found:
        return ""
    return "; did you mean " + " or ".join(repr(m) for m in found) + "?"


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


class DataError(DistreproError):
    """A data file a dataset reads is unusable (not an image, truncated): the message names the file."""


class Terminated(KeyboardInterrupt):
    """A termination signal (SIGTERM, SIGHUP) turned into Ctrl-C's exception, so that it takes Ctrl-C's path:
    runs marked KILLED, ranks ended, a resume hint (:mod:`distrepro.orchestration.interrupts`)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"terminated by {signal.Signals(signum).name}")


def note_killed_run(exc: BaseException, run_id: str) -> None:
    """Record on an interrupt in flight that it left MLflow run ``run_id`` KILLED (for the resume hint)."""
    exc.distrepro_killed_runs = [*killed_runs(exc), run_id]  # type: ignore[attr-defined]


def killed_runs(exc: BaseException) -> list[str]:
    """The runs an interrupt left KILLED, in the order they were closed (see :func:`note_killed_run`)."""
    return list(getattr(exc, "distrepro_killed_runs", []))


def describe_unexpected(exc: BaseException, plugin_site: tuple[str, int, str] | None = None) -> str:
    """One line for an error no check foresaw (a bug, in the suite or a plugin): its type, the first line of its
    message and where it was raised, so a report can start from it; the traceback is for ``--debug``.

    ``plugin_site`` (path, line, function: :func:`distrepro.plugins.crash_site.plugin_frame`) is the innermost
    frame inside a plugin, shown instead of the innermost frame, which may be deep in torch."""
    text = str(exc).strip().splitlines()
    frames = traceback.extract_tb(exc.__traceback__)
    if plugin_site is not None:
        where = f" (at {plugin_site[0]}:{plugin_site[1]} in {plugin_site[2]})"
    else:
        where = f" ({Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    first = f"{text[0]} ..." if len(text) > 1 else (text[0] if text else "")
    return f"unexpected {type(exc).__name__}: {first}{where}; rerun with --debug for the traceback"


class WorkerFailure(DistreproError):
    """A worker raised or died; carries the rank so the message can name it."""

    def __init__(self, rank: int, message: str) -> None:
        self.rank = rank
        super().__init__(f"worker rank {rank} failed: {message}")


#: the labels pydantic puts in an error's location for the branches of a union (``int | list[int]``
#: fails as ``micro_batch.constrained-int`` and ``micro_batch.list[constrained-int].1``): not fields
_UNION_BRANCH = re.compile(r"^(?:constrained-\w+|[a-z-]+\[.*\]|int|float|str|bool|list|dict|tuple)$")


def _field(loc: tuple[Any, ...]) -> tuple[str, str]:
    """(dotted field, the part of it before the first union branch): ``micro_batch[1]``, ``micro_batch``."""
    field, before_union = "", None
    for part in loc:
        if isinstance(part, int):
            field += f"[{part}]"
        elif _UNION_BRANCH.match(str(part)):
            before_union = field if before_union is None else before_union
        else:
            field += ("." if field else "") + str(part)
    return field, field if before_union is None else before_union


def format_pydantic_error(source: str | Path | None, exc: Exception) -> ConfigError:
    """Turn a ``pydantic.ValidationError`` into a :class:`ConfigError` naming the first bad field.

    A union reports one error per branch; the one shown is a branch's value error (``[64, 0]`` for
    ``int | list[int]``: item 1 must be >= 1) rather than the other branch's "not an integer".
    """
    errors = getattr(exc, "errors", None)
    if callable(errors):
        items = errors()
        if items:
            fields = [_field(item.get("loc", ())) for item in items]
            same = [(f, i) for (f, key), i in zip(fields, items, strict=True) if key == fields[0][1]]
            field, first = next(((f, i) for f, i in same if not str(i.get("type")).endswith("_type")), same[0])
            msg = first.get("msg", str(exc))
            value = first.get("input")
            if first.get("type") not in ("missing", "extra_forbidden") and isinstance(value, (int, float, str)):
                msg = f"{msg}, got {value!r}"  # the value as read: "-1" from YAML is not -1
            others = len({key for _, key in fields}) - 1  # problems, not union branches
            extra = f" (and {others} more problem(s))" if others else ""
            return ConfigError(source, field or None, f"{msg}{extra}")
    return ConfigError(source, None, str(exc))


def read_text_file(path: Path, what: str = "file") -> str:
    """The UTF-8 text of a user file; an unreadable or binary file (a PNG passed as CONFIG) is one
    :class:`ConfigError` naming it, not a ``UnicodeDecodeError`` traceback from the codec."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        byte = exc.object[exc.start] if exc.start < len(exc.object) else None
        shown = f"byte 0x{byte:02x}" if isinstance(byte, int) else "a byte"
        raise ConfigError(
            path, None, f"not a text {what}: {shown} at offset {exc.start} is not UTF-8 (a binary file?)"
        ) from None
    except OSError as exc:
        raise ConfigError(path, None, f"cannot read {what}: {exc.strerror or exc}") from None


def yaml_error(path: str | Path | None, exc: Any) -> ConfigError:
    """One line for a PyYAML error, with the line and column where it has them.

    PyYAML's own messages span several lines; a reader error (a control character such as NUL in
    text that decoded as UTF-8, i.e. a binary file) has no line mark but an offset.
    """
    mark = getattr(exc, "problem_mark", None)
    position, character = getattr(exc, "position", None), getattr(exc, "character", None)
    if mark is None and isinstance(position, int):
        char = f"character #x{character:04x}" if isinstance(character, int) else "a character"
        reason = getattr(exc, "reason", None) or "not allowed"
        message = f"not a YAML text file: {char} at offset {position} ({reason})"
    else:
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        message = f"malformed YAML{where}: {getattr(exc, 'problem', None) or exc}"
    return ConfigError(path, None, " ".join(message.split()))
