"""What a campaign's cells are doing: queued, running, done, failed, and when the rest should be done.

The ETA is the mean wall time of the cells finished so far times the cells left, divided by how many run
at once (never more than are left): a campaign's cells are of a few kinds whose cost the first ones tell.
How many run at once is the executor's number of slots where it has one (``--jobs``), else the most cells
seen running together (a Ray or SLURM cluster's share for this campaign is not known in advance). Until
one cell has finished there is no ETA, which is said.

One line on stderr per finished cell (and when cells start, at most every few seconds), so a CI log shows
the campaign is alive; on a terminal with bars, one bar whose description is the same line.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from distrepro.orchestration.executors.cell_task import CellOutcome, CellTask

#: least seconds between two lines that only report cells starting
QUIET_S = 10.0


def _clock(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class CellProgress:
    def __init__(self, total: int, parallel: int | None, progress: Any = None, stream: Any = None) -> None:
        self.total, self.slots = total, parallel
        self.most_running = 1
        self.progress, self.stream = progress, stream or sys.stderr
        self.running: set[str] = set()
        self.done = self.failed = 0
        self.walls: list[float] = []
        self.t0 = time.perf_counter()
        self._last_line = 0.0
        self._task = progress.add_task(self.line(), total=total) if progress is not None else None

    @property
    def queued(self) -> int:
        return self.total - self.done - self.failed - len(self.running)

    def eta_s(self) -> float | None:
        if not self.walls:
            return None
        left = self.total - self.done - self.failed
        return sum(self.walls) / len(self.walls) * left / min(self.parallel, max(left, 1))

    @property
    def parallel(self) -> int:
        return max(1, self.slots or self.most_running)

    def line(self) -> str:
        eta = self.eta_s()
        when = "ETA –" if eta is None else f"ETA {_clock(eta)}"
        return (
            f"cells: {self.queued} queued · {len(self.running)} running · {self.done} done · {self.failed} failed"
            f" · {_clock(time.perf_counter() - self.t0)} elapsed · {when}"
        )

    def __call__(self, kind: str, task: CellTask, outcome: CellOutcome | None) -> None:
        """The executors' event callback: ``"running"`` when a cell starts, ``"done"`` with its outcome."""
        if kind == "running":
            self.running.add(task.key)
            self.most_running = max(self.most_running, len(self.running))
            self._show(f"{task.label}: running", quiet=True)
            return
        assert outcome is not None
        self.running.discard(task.key)
        if outcome.status == "FINISHED":
            self.done += 1
            self.walls.append(outcome.wall_s)
            self._show(f"{task.label}: done in {outcome.wall_s:.1f}s")
        else:
            self.failed += 1
            self._show(f"{task.label}: {outcome.status} ({outcome.reason})")

    def _show(self, what: str, quiet: bool = False) -> None:
        if self.progress is not None:
            self.progress.update(self._task, completed=self.done + self.failed, description=self.line())
            return
        now = time.perf_counter()
        if quiet and now - self._last_line < QUIET_S:
            return
        self._last_line = now
        print(f"[{what}] {self.line()}", file=self.stream, flush=True)
