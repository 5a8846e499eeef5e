"""The runs a watched command holds open, noted in a file its watcher reads after it ends.

A command that trains in its own process can end without a word: ``os._exit(0)`` in a plugin skips every
``finally`` and exit hook, and a kill by the kernel (out of memory) gives no chance to write anything. Only another
process can notice. The ``distrepro`` command line runs ``run`` and ``reproduce`` in a child process it watches
(:mod:`distrepro.cli.watch`); the child notes here each campaign (or reproduction) run it opens and closes, and the
exit status its ``main`` returned. When the child ends without that last note, the runs it left open are the ones
the watcher marks FAILED.

One JSON object per line, appended (``O_APPEND``: a line is written whole even by several processes). Outside a
watched command (``main()`` called from Python, a test) :data:`NOTES_ENV` is unset and nothing is written.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

#: the file the watcher reads; set in the watched child's environment
NOTES_ENV = "DISTREPRO_OPEN_RUNS"


def _note(record: dict[str, object]) -> None:
    path = os.environ.get(NOTES_ENV)
    if not path:
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError:  # the watcher's file is gone: it can only fall back to what the store says
        return
    try:
        os.write(fd, (json.dumps(record) + "\n").encode())
    finally:
        os.close(fd)


def note_open(run_id: str, uri: str, kind: str) -> None:
    """Run ``run_id`` (a ``kind``: campaign run, reproduction run) of store ``uri`` is open in this process."""
    _note({"open": run_id, "uri": uri, "kind": kind, "pid": os.getpid()})


def note_closed(run_id: str) -> None:
    _note({"closed": run_id})


def note_exit(status: int) -> None:
    """The command's ``main`` returned ``status``: whatever happens after is no longer "ended without finishing"."""
    _note({"exit": status})


@dataclass
class OpenRun:
    run_id: str
    uri: str
    kind: str
    pid: int


@dataclass
class Notes:
    """What a watched command noted: the runs still open (first opened first), and its exit status if it got there."""

    open: list[OpenRun] = field(default_factory=list)
    exit: int | None = None


def read_notes(path: Path) -> Notes:
    """What ``path`` records (a line cut short by the process's end is skipped)."""
    notes = Notes()
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return notes
    opened: dict[str, OpenRun] = {}
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        if "open" in record:
            kind, pid = str(record.get("kind", "campaign run")), int(record.get("pid", 0) or 0)
            opened[str(record["open"])] = OpenRun(str(record["open"]), str(record.get("uri", "")), kind, pid)
        elif "closed" in record:
            opened.pop(str(record["closed"]), None)
        elif "exit" in record:
            notes.exit = int(record["exit"])
    notes.open = list(opened.values())
    return notes
