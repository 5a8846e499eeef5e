"""What an engine is, as its caller sees it: one call that trains a job into a run.

Orchestration is the only caller of the engines and picks one by the config's ``engine`` name; typing that call here,
below both, lets orchestration hold an :class:`Engine` without importing an engine module, and tells a new engine
exactly what to implement. An engine is handed where its run is recorded (a :class:`RunSink`) and who else listens
(``progress``); it never chooses or builds either, so it depends on these interfaces, not on MLflow.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from distrepro.job.observer import RunObserver
from distrepro.job.resolve import Job
from distrepro.job.results import RunResult


class RunSink(Protocol):
    """One cell's run as an engine records into it: tags, the run's observer, and a flush before another writer.

    ``reopener`` returns a picklable callable that opens the same run again in another process: the distributed
    engine's rank 0 writes the run's evaluations from its own process, after the launcher flushed what it holds.
    """

    @property
    def run_id(self) -> str: ...

    def set_tags(self, tags: Mapping[str, str]) -> None: ...

    def observer(self) -> RunObserver: ...

    def flush(self) -> None: ...

    def reopener(self) -> Callable[[], RunSink]: ...


class Engine(Protocol):
    """Trains one job (one seed of one config) and returns its result.

    ``sink`` is the cell's run (``None``: nothing recorded, as in tests and benchmarks); ``progress`` listens beside
    it; ``resume_from`` is a complete checkpoint folder to continue from, where the engine supports one.
    """

    name: str

    def run_cell(
        self,
        job: Job,
        sink: RunSink | None,
        progress: RunObserver | None = None,
        resume_from: Path | None = None,
    ) -> RunResult: ...
