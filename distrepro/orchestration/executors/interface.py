"""The interface every executor implements (see the package docstring): ``run(tasks, events) -> outcomes``.

A :class:`typing.Protocol`, so that the local pool, Ray and SLURM executors (and a test's fake) are checked by
their shape, and so that callers (``distrepro reproduce``, :mod:`.dispatch`) can name the type without importing
an executor's optional dependency.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from distrepro.orchestration.executors.cell_task import CellOutcome, CellTask

#: ``events("running" | "done", task, outcome)`` as cells start and end (outcome None while running)
Events = Callable[[str, CellTask, CellOutcome | None], None]


class Executor(Protocol):
    """Runs cells somewhere; ``remote`` says whether they may run on other machines (a tracking server needed)."""

    remote: bool

    def run(self, tasks: list[CellTask], events: Events) -> list[CellOutcome]: ...
