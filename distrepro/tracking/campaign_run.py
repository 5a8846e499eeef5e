"""A campaign in MLflow: one parent run for a ``distrepro run`` invocation, a child run per cell, closed as it ended.

Why a module of its own: opening, locking, resuming and closing a campaign's runs (FINISHED, FAILED, KILLED on
Ctrl-C or SIGTERM, left RUNNING when the store itself failed) is one concern; which store, which client and which
experiment (:mod:`distrepro.tracking.mlflow_client`) is another, used by every reader of the store as well.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from distrepro.errors import StoreUnavailable, note_killed_run
from distrepro.tracking.campaign_lock import CampaignLock
from distrepro.tracking.mlflow_client import (
    default_artifact_location,
    ensure_experiment,
    make_client,
    resolve_tracking_uri,
)
from distrepro.tracking.open_runs import note_closed, note_open
from distrepro.tracking.provenance import git_info, host_info, versions
from distrepro.tracking.runlog import RunLogger, flatten_params, status_for

if TYPE_CHECKING:
    from mlflow import MlflowClient

__all__ = ["Campaign", "provenance_tags"]

_log = logging.getLogger(__name__)


def provenance_tags(repo: Path) -> dict[str, str]:
    """``git.*``, ``versions.*`` and ``host.*`` tags, plus MLflow's own source tags for the UI."""
    git = git_info(repo)
    tags = flatten_params({"git": git, "versions": versions(), "host": host_info()})
    if git["commit"] != "unknown":
        tags["mlflow.source.git.commit"] = git["commit"]
        tags["mlflow.source.git.branch"] = git["branch"]
    return tags


class Campaign:
    """One ``distrepro run`` invocation: an MLflow parent run with one child run per cell.

    Use as a context manager. On enter the experiment is created if needed and the parent run
    starts (RUNNING) with ``tags``, provenance tags and flattened ``params``. On exit the parent
    becomes FINISHED, or FAILED if an exception escapes (KILLED on Ctrl-C or SIGTERM); the exception always
    propagates. Children still open at exit are closed FAILED (KILLED on Ctrl-C).

    The run is locked to this process while it is open (:mod:`distrepro.tracking.campaign_lock`): a new run's lock
    is taken when it is created, a resumed run's before it is RUNNING again (or earlier, by the caller, and handed in
    as ``lock``: a resume must own the campaign before it reads which seeds are left); ``kind`` names the run in the
    lock's lines. A live holder makes ``__enter__`` raise :class:`~distrepro.tracking.campaign_lock.CampaignLocked`.

    Children inherit the campaign's tags and provenance tags so that ``search_runs`` filters
    such as ``tags.paper = 'x'`` or ``tags.\\`git.commit\\` = '…'`` match the cells themselves.
    """

    def __init__(
        self,
        experiment: str,
        name: str,
        tags: Mapping[str, Any],
        params: Mapping[str, Any] | None = None,
        tracking_uri: str | None = None,
        *,
        repo: Path | None = None,
        artifact_location: str | None = None,
        flush_every_s: float | None = 30.0,
        resume_run_id: str | None = None,
        system_metrics: bool = False,
        lock: CampaignLock | None = None,
        kind: str = "campaign run",
    ) -> None:
        self.resume_run_id = resume_run_id
        self.lock = lock
        self.kind = kind
        self.system_metrics = system_metrics
        self.experiment = experiment
        self.name = name
        self.tags = {k: str(v) for k, v in tags.items()}
        self.params = dict(params or {})
        self.tracking_uri = tracking_uri or resolve_tracking_uri()
        self.repo = repo if repo is not None else Path(__file__).resolve().parents[2]
        self.artifact_location = artifact_location or default_artifact_location(self.tracking_uri, experiment)
        self.flush_every_s = flush_every_s
        self.client: MlflowClient | None = None
        self.experiment_id: str | None = None
        self.run_id: str | None = None
        self.provenance: dict[str, str] = {}
        self._parent: RunLogger | None = None
        self._children: list[RunLogger] = []

    @property
    def parent(self) -> RunLogger:
        """The parent run's logger (for campaign-level metrics, tags and artifacts)."""
        if self._parent is None:
            raise RuntimeError("the campaign has not started; use it as 'with Campaign(...) as c:'")
        return self._parent

    def __enter__(self) -> Campaign:
        try:
            self._open()
        except BaseException:
            self.release_lock()  # 'with' does not call __exit__ when __enter__ fails
            raise
        return self

    def _open(self) -> None:
        self.client = make_client(self.tracking_uri)
        self.experiment_id = ensure_experiment(self.client, self.experiment, self.artifact_location)
        self.provenance = provenance_tags(self.repo)
        if self.resume_run_id is not None:  # continue a failed campaign: same parent run, RUNNING again
            if self.lock is None:
                self.lock = CampaignLock(make_client(self.tracking_uri), self.resume_run_id, self.kind)
            if not self.lock.held:
                self.lock.acquire()  # a live holder: refused before the run is touched
            self.client.update_run(self.resume_run_id, status="RUNNING")
            self.run_id = self.resume_run_id
        else:
            run = self.client.create_run(self.experiment_id, run_name=self.name)
            self.run_id = run.info.run_id
        self._parent = RunLogger(self.client, self.run_id, flush_every_s=self.flush_every_s)
        try:  # 'with' does not call __exit__ when __enter__ fails: close the run here
            if self.lock is None:  # a new run: nobody else knows its id yet, so the first generation is ours
                self.lock = CampaignLock(make_client(self.tracking_uri), self.run_id, self.kind)
                self.lock.acquire()
            note_open(self.run_id, self.tracking_uri, self.kind)  # for a watcher, should this process vanish
            self._parent.set_tags({**self.provenance, **self.tags})
            if self.params:
                self._parent.log_params(self.params)
        except BaseException as exc:
            self._parent.__exit__(type(exc), exc, exc.__traceback__)
            note_closed(self.run_id)
            raise

    def release_lock(self) -> None:
        """Let another process write to this campaign (idempotent; the campaign's exit calls it)."""
        if self.lock is not None:
            self.lock.release()

    def child(
        self,
        run_name: str,
        params: Mapping[str, Any] | None = None,
        tags: Mapping[str, Any] | None = None,
    ) -> RunLogger:
        """Start a child run (tag ``mlflow.parentRunId``, which the UI uses to draw the tree)."""
        parent = self.parent
        if parent.closed:
            raise RuntimeError("the campaign is over; children can only start inside its 'with' block")
        assert self.client is not None and self.experiment_id is not None
        # The parent link goes in at creation so the UI never shows the child as a top-level run.
        run = self.client.create_run(self.experiment_id, tags={"mlflow.parentRunId": parent.run_id}, run_name=run_name)
        logger = RunLogger(
            self.client, run.info.run_id, flush_every_s=self.flush_every_s, system_metrics=self._system_metrics()
        )
        self._children.append(logger)  # from here on, campaign exit closes it whatever happens
        user_tags = {k: v for k, v in (tags or {}).items() if k != "mlflow.parentRunId"}
        logger.set_tags({**self.provenance, **self.tags, **user_tags})
        if params:
            logger.log_params(params)
        return logger

    def reopen_child(self, run_id: str) -> RunLogger:
        """Continue logging into an existing child run (``--resume``); it is RUNNING again."""
        assert self.client is not None
        self.client.update_run(run_id, status="RUNNING")
        logger = RunLogger(self.client, run_id, flush_every_s=self.flush_every_s, system_metrics=self._system_metrics())
        self._children.append(logger)
        return logger

    def _system_metrics(self) -> dict[str, Any] | None:
        """What a child's :class:`RunLogger` needs to sample system metrics (``--system-metrics``), or None."""
        return {"tracking_uri": self.tracking_uri} if self.system_metrics else None

    def children(self) -> list[Any]:
        """The child runs already under this campaign's parent (for ``--resume``)."""
        assert self.client is not None and self.experiment_id is not None
        return self.client.search_runs(
            [self.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{self.run_id}'"
        )

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        self.parent.set_tags(tags)

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        self.parent.log_artifact(path, artifact_path)

    def log_text(self, text: str, artifact_file: str) -> None:
        self.parent.log_text(text, artifact_file)

    def log_dict(self, obj: Any, artifact_file: str) -> None:
        self.parent.log_dict(obj, artifact_file)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Literal[False]:
        try:
            return self._close(exc_type, exc, tb)
        finally:
            self.release_lock()
            if self.run_id is not None:
                note_closed(self.run_id)

    def _close(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        if isinstance(exc, StoreUnavailable):
            return False  # nothing can be written: the runs stay RUNNING, for --resume to continue
        status = status_for(exc_type, exc)
        if status == "KILLED" and exc is not None and self.run_id is not None:
            note_killed_run(exc, self.run_id)  # Ctrl-C or SIGTERM: the CLI's hint names the run to resume
        for child in self._children:
            if not child.closed:
                try:
                    child.finish("KILLED" if status == "KILLED" else "FAILED")
                except StoreUnavailable:
                    break  # the store went away while closing: the error that got us here is what matters
                except Exception:
                    _log.exception("could not close child run %s", child.run_id)
        if self._parent is not None:
            if exc_type is None:
                self._parent.finish(status)
            else:
                self._parent.__exit__(exc_type, exc, tb)
        return False
