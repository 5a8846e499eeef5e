"""Progress of long work on stderr: the per-run display (:class:`ProgressObserver`, an engine's observer, whose
:meth:`~ProgressObserver.status` a :func:`distrepro.orchestration.heartbeat.heartbeat` prints), and the same display
for work that trains nothing (:class:`PhaseProgress`, the sensitivity sweep, the report).

A live bar (:func:`progress_bars`) when stderr is a terminal and the user did not pass ``--no-progress``
(:func:`wants_bars`), otherwise a few plain lines that a CI log keeps.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from typing import Any, Protocol

from distrepro import metrics as M
from distrepro.api.method import Allocation
from distrepro.job.results import EvalRecord

#: set by ``--verbose`` (and inherited by workers, ranks and SLURM jobs): every evaluation gets a line
VERBOSE_ENV = "DISTREPRO_VERBOSE"
_silenced = 0  # > 0 inside :func:`silenced`


def verbose() -> bool:
    """Whether every evaluation prints a line (``--verbose``), not only each run's last."""
    return os.environ.get(VERBOSE_ENV, "") not in ("", "0")


@contextlib.contextmanager
def silenced() -> Iterator[None]:
    """No evaluation lines at all while the block runs: short runs a report trains (Decent-DP's Fig. 6 cells) show
    one progress line per cell instead, printed by whoever runs them."""
    global _silenced
    _silenced += 1
    try:
        yield
    finally:
        _silenced -= 1


class ProgressObserver:
    """Shows progress: a live bar on a terminal; otherwise (CI logs) a line at each run's final evaluation, and at
    every evaluation with ``--verbose`` (early evaluations of a short proxy run sit near chance and read as a
    failure; the heartbeat and the cell counter show the run is alive)."""

    def __init__(
        self, label: str, progress: Any | None, task: Any | None, stream: Any = None, verbose: bool | None = None
    ) -> None:
        self.label = label
        self.verbose = verbose
        self.progress = progress
        self.task = task
        self.stream = stream or sys.stderr
        self.last_acc: float | None = None
        self.fraction = 0.0  # of the budget, and the emulated time at it: what a heartbeat line says
        self.emulated_s = 0.0

    def on_allocation(self, epoch: int, allocation: Allocation) -> None:
        pass

    def on_eval(self, record: EvalRecord) -> None:
        self.last_acc = record.metrics.get(M.VAL_ACCURACY)
        wanted = record.final or (self.verbose if self.verbose is not None else verbose())
        if self.progress is None and wanted and not _silenced:
            print(
                f"[{self.label}] step {record.step} epoch {record.epoch:.2f} emulated {record.emulated_s:.3f}s "
                f"val_acc {record.metrics[M.VAL_ACCURACY]:.4f} val_loss {record.metrics[M.VAL_LOSS]:.4f}"
                f"{' (final)' if record.final else ''}",
                file=self.stream,
                flush=True,
            )

    def on_progress(self, fraction: float, emulated_s: float) -> None:
        self.fraction, self.emulated_s = fraction, emulated_s
        if self.progress is not None:
            acc = f" acc {self.last_acc:.3f}" if self.last_acc is not None else ""
            self.progress.update(
                self.task, completed=fraction * 1000, description=f"{self.label} · emu {emulated_s:.2f}s{acc}"
            )

    def status(self) -> str:
        """One line of where the run is, for :func:`heartbeat`."""
        if self.fraction <= 0 and self.last_acc is None:
            return f"{self.label}: training (no progress reported yet)"
        acc = f", val_acc {self.last_acc:.4f}" if self.last_acc is not None else ""
        return f"{self.label}: {100 * self.fraction:.0f}% of the budget, emulated {self.emulated_s:.3f}s{acc}"


def counted(n: int, noun: str) -> str:
    """``"1 run"``, ``"2 runs"``: a phase's name as a progress line shows it."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def wants_bars(show_progress: bool | None) -> bool:
    """A live bar, or plain lines? ``None`` (no ``--no-progress``): a bar only when stderr is a terminal,
    since a bar redrawn in a CI log or a redirected file is noise; ``False`` (``--no-progress``): lines."""
    return sys.stderr.isatty() if show_progress is None else show_progress


@contextlib.contextmanager
def progress_bars(enabled: bool) -> Iterator[Any]:
    """A rich ``Progress`` on stderr while the block runs (``None`` when not ``enabled``): one display for a
    campaign's cells (:class:`ProgressObserver`) and for a sweep's phases (:class:`PhaseProgress`)."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=False,
    ) as progress:
        yield progress


class Phases(Protocol):
    """What a long computation reports: it enters a phase of ``total`` units, then finishes units."""

    def phase(self, name: str, total: int) -> None: ...

    def advance(self, n: int = 1) -> None: ...

    def close(self) -> None: ...


class NoPhases:
    """Reports nothing: a library call (a test, a report built from Python) prints no progress unless asked."""

    def phase(self, name: str, total: int) -> None:
        pass

    def advance(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


class PhaseProgress:
    """Shows work that trains nothing (the sensitivity sweep: minutes, no evaluations to show) phase by phase,
    as :class:`ProgressObserver` shows training: a bar per phase on a terminal (``progress``, a rich
    ``Progress`` from :func:`progress_bars`), otherwise one line when a phase starts, at each quarter of it and
    at the end (``stream``, stderr by default), with the time elapsed, so a CI log shows the job is alive."""

    def __init__(self, label: str, progress: Any | None, stream: Any = None) -> None:
        self.label = label
        self.progress = progress
        self.stream = stream or sys.stderr
        self._t0 = time.perf_counter()
        self._task: Any = None
        self._name, self._total, self._done = "", 0, 0

    def _line(self, text: str) -> None:
        elapsed = int(time.perf_counter() - self._t0)
        stamp = f"{elapsed // 3600}:{elapsed // 60 % 60:02d}:{elapsed % 60:02d}"
        print(f"[{self.label} {stamp}] {text}", file=self.stream, flush=True)

    def _finish_task(self) -> None:
        if self.progress is not None and self._task is not None:
            self.progress.update(self._task, completed=self._total)

    def phase(self, name: str, total: int) -> None:
        self._finish_task()
        self._name, self._total, self._done = name, max(int(total), 0), 0
        if self.progress is not None:
            self._task = self.progress.add_task(f"{self.label} · {name}", total=self._total)
        else:
            self._line(f"{name}: 0/{self._total}")

    def advance(self, n: int = 1) -> None:
        before, self._done = self._done, self._done + n
        if self.progress is not None:
            self.progress.update(self._task, advance=n)
        elif self._total and 4 * before // self._total < 4 * self._done // self._total < 4:
            self._line(f"{self._name}: {self._done}/{self._total}")

    def close(self) -> None:
        self._finish_task()
        if self.progress is None:
            self._line("done")
