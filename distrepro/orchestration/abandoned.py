"""Runs a process left open when it ended without finishing: marked FAILED, with why.

A command's process that ends without closing its runs (``os._exit`` in a plugin, a kill by the kernel) leaves them
RUNNING for ever, and its campaign lock held. Its watcher (:mod:`distrepro.cli.watch`) knows which runs it held open
(:mod:`distrepro.tracking.open_runs`) and closes them here as the executors close a cell whose worker died: FAILED,
the reason in the ``distrepro.failure`` tag, the unfinished seed runs with their campaign; the lock is released so
that ``--resume`` continues at once.
"""

from __future__ import annotations

from distrepro.orchestration.executors.cell_task import FAILURE_TAG
from distrepro.tracking.campaign_lock import release_abandoned
from distrepro.tracking.mlflow_client import make_client

#: statuses of a run that has not ended
_OPEN = ("RUNNING", "SCHEDULED")


def fail_abandoned(uri: str, run_id: str, pid: int, reason: str) -> list[str]:
    """Mark run ``run_id`` (a campaign or reproduction run) and its unfinished child runs FAILED with ``reason``;
    release the lock process ``pid`` held on it. Returns the child runs marked."""
    client = make_client(uri)
    run = client.get_run(run_id)
    children = client.search_runs(
        [run.info.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{run_id}'", max_results=10_000
    )
    marked = []
    for child in children:
        if child.info.status in _OPEN:
            client.set_tag(child.info.run_id, FAILURE_TAG, reason[:7000])
            client.set_terminated(child.info.run_id, "FAILED")
            marked.append(child.info.run_id)
    if run.info.status in _OPEN:
        client.set_tag(run_id, FAILURE_TAG, reason[:7000])
        client.set_terminated(run_id, "FAILED")
    release_abandoned(client, run_id, pid)
    return marked
