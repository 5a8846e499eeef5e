"""The campaign's progress line: cells queued / running / done / failed, and an ETA from finished cells."""

from __future__ import annotations

import io

from distrepro.orchestration.executors.cell_progress import CellProgress
from distrepro.orchestration.executors.cell_task import CellOutcome, CellTask


def _task(key: str) -> CellTask:
    return CellTask(
        key=key, campaign=key.split("/")[0], label=key, config={}, seed=0, source=None, tracking_uri="",
        experiment_id="", parent_run_id="", run_id=key, threads=1, cpus=1, world_size=1, engine="inprocess",
    )  # fmt: skip


def test_counts_and_eta_from_finished_cells() -> None:
    out = io.StringIO()
    progress = CellProgress(total=5, parallel=2, stream=out)
    assert "5 queued · 0 running · 0 done · 0 failed" in progress.line() and "ETA –" in progress.line()
    a, b, c = _task("a/s0"), _task("a/s1"), _task("b/s0")
    progress("running", a, None)
    progress("running", b, None)
    assert progress.queued == 3 and len(progress.running) == 2
    progress("done", a, CellOutcome(a.key, 0, a.run_id, "FINISHED", wall_s=60.0))
    progress("done", b, CellOutcome(b.key, 1, b.run_id, "FAILED", reason="boom"))
    # one cell took 60 s; 3 are left, 2 at a time: 60 * 3 / 2 = 90 s
    assert progress.eta_s() == 90.0
    assert "3 queued · 0 running · 1 done · 1 failed" in progress.line() and "ETA 0:01:30" in progress.line()
    progress("running", c, None)
    lines = out.getvalue().splitlines()
    assert any("a/s1: FAILED (boom)" in ln for ln in lines) and any("a/s0: done in 60.0s" in ln for ln in lines)


def test_eta_never_assumes_more_parallelism_than_cells_left() -> None:
    progress = CellProgress(total=3, parallel=8, stream=io.StringIO())
    t = _task("x/s0")
    progress("done", t, CellOutcome(t.key, 0, t.run_id, "FINISHED", wall_s=10.0))
    assert progress.eta_s() == 10.0  # two left, both at once: one cell's time


def test_without_slots_the_eta_assumes_the_most_cells_seen_running_together() -> None:
    progress = CellProgress(total=6, parallel=None, stream=io.StringIO())  # Ray, SLURM: the share is not known
    a, b, c = _task("r/s0"), _task("r/s1"), _task("r/s2")
    for t in (a, b, c):
        progress("running", t, None)
    progress("done", a, CellOutcome(a.key, 0, a.run_id, "FINISHED", wall_s=30.0))
    assert progress.parallel == 3 and progress.eta_s() == 30.0 * 5 / 3
