"""What a worker tags its cell's run with: where it ran, and the torch threads it gave a cell that sets none."""

from __future__ import annotations

import pytest

from distrepro.orchestration.executors.cell_task import THREADS_TAG, WORKER_TAG, CellTask, worker_tags


def _task(config: dict[str, object], threads: int) -> CellTask:
    return CellTask(
        key="a/s0", campaign="a", label="a · seed 0", config=config, seed=0, source=None, tracking_uri="",
        experiment_id="", parent_run_id="", run_id="r", threads=threads, cpus=threads, world_size=1,
        engine="inprocess", executor="local",
    )  # fmt: skip


@pytest.mark.smoke
def test_a_cell_without_threads_is_tagged_with_what_its_worker_gave_it() -> None:
    tags = worker_tags(_task({"torch_threads": None}, threads=1), "local:host")
    assert tags == {WORKER_TAG: "local:host", THREADS_TAG: "1 (set by the local executor)"}


@pytest.mark.smoke
def test_a_cell_that_sets_its_threads_keeps_the_campaigns_tag() -> None:
    assert worker_tags(_task({"torch_threads": 3}, threads=1), "local:host") == {WORKER_TAG: "local:host"}
