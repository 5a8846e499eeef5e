"""MLflow logging for campaigns (parent runs) and cells (child runs).

Why this module exists instead of plain ``mlflow.log_metric``:

* On the default sqlite store one ``log_metric`` costs 7–10 ms; :class:`RunLogger` buffers metric
  points and writes them with ``log_batch``, so a training loop never waits on the DB per step.
* The fluent API keeps one global "active run"; several campaigns in one process (tests, a
  notebook) would trample each other. Everything here goes through an explicit ``MlflowClient``.
* The MLflow UI can only plot against step or wall time, so :meth:`RunLogger.log_emulated` writes
  ``emu/<key>`` series whose step is emulated milliseconds (custom x-axes are an open MLflow
  feature request, mlflow/mlflow#11739).
* A store fault must be one line within seconds, not minutes of retries and a traceback: HTTP
  retries are bounded below, :func:`make_client` returns a :class:`~distrepro.tracking.storeguard.GuardedClient`,
  and :mod:`distrepro.tracking.storeprobe` checks the store before a campaign starts.

Only rank 0 should write (sqlite does not like concurrent writers); other ranks send their
statistics to rank 0.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, cast

from distrepro.errors import StoreUnavailable, TrackingError, note_killed_run
from distrepro.names import check_name
from distrepro.tracking.campaign_lock import CampaignLock
from distrepro.tracking.open_runs import note_closed, note_open
from distrepro.tracking.provenance import git_info, host_info, versions
from distrepro.tracking.runlog import (
    MAX_METRICS_PER_BATCH,
    MAX_PARAM_VAL_LENGTH,
    MAX_PARAMS_TAGS_PER_BATCH,
    MAX_TAG_VAL_LENGTH,
    TRUNCATION_MARKER,
    RunLogger,
    RunStatus,
    flatten,
    flatten_params,
    status_for,
)
from distrepro.tracking.ui_view import EXPERIMENT_KIND_TAG, MODEL_TRAINING_KIND, ensure_views, view_tags

if TYPE_CHECKING:
    from mlflow import MlflowClient

__all__ = [
    "MAX_METRICS_PER_BATCH",
    "MAX_PARAMS_TAGS_PER_BATCH",
    "MAX_PARAM_VAL_LENGTH",
    "MAX_TAG_VAL_LENGTH",
    "TRUNCATION_MARKER",
    "Campaign",
    "RunLogger",
    "RunStatus",
    "StoreUnavailable",
    "TrackingError",
    "ensure_experiment",
    "experiment_name",
    "flatten",
    "flatten_params",
    "make_client",
    "provenance_tags",
    "resolve_tracking_uri",
]

# Telemetry is on by default in MLflow 3 and writes ~/.config/mlflow; a benchmark harness should
# not phone home. Set before any mlflow import so the setting is seen however mlflow is reached.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
# SQLAlchemy 2.x warns about MLflow's own use of ``noload`` when the sqlite store is imported; it
# is MLflow's concern, not the user's, and it breaks test sessions run with ``-W error``.
_NOLOAD_WARNING = r".*[Tt]he ``?noload``? loader strategy is deprecated"
warnings.filterwarnings("ignore", message=_NOLOAD_WARNING)
# MLflow retries a failed HTTP request 7 times with backoff factor 2 and a 120 s timeout: a server
# that is down costs ~4 minutes before the error. A benchmark's store is a local file or a server
# on the same network: two quick retries (~3 s in all) ride out a blip, and a campaign's checks of
# the store come before any training. Users can still set these variables themselves.
for _var, _value in (
    ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2"),
    ("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1"),
    ("MLFLOW_HTTP_REQUEST_BACKOFF_JITTER", "0.5"),
    ("MLFLOW_HTTP_REQUEST_TIMEOUT", "15"),
):
    os.environ.setdefault(_var, _value)

_log = logging.getLogger(__name__)


def resolve_tracking_uri() -> str:
    """``MLFLOW_TRACKING_URI`` if set, else ``sqlite:///<abs cwd>/mlflow.db``.

    That default is what ``mlflow ui`` started in the same folder reads, so results are visible
    without extra flags. The path is made absolute so a later ``chdir`` cannot split the store.
    """
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    uri = os.environ.get("MLFLOW_TRACKING_URI", "").strip()
    if uri:
        return uri
    return f"sqlite:///{Path.cwd().resolve() / 'mlflow.db'}"


#: loggers whose INFO lines a new store prints once ("Creating initial MLflow database tables...", alembic's
#: migrations): bookkeeping, not news; their warnings and errors still show
_FIRST_USE_LOGGERS = ("mlflow.store.db.utils", "alembic", "alembic.runtime.migration")


def quiet_first_use() -> None:
    """Raise the first-use loggers of MLflow's SQL store to WARNING (once per process is enough; idempotent)."""
    import logging

    for name in _FIRST_USE_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def make_client(tracking_uri: str | None = None) -> MlflowClient:
    """An ``MlflowClient`` for ``tracking_uri`` (default :func:`resolve_tracking_uri`), guarded.

    Guarded (:class:`~distrepro.tracking.storeguard.GuardedClient`): a store fault is one-line
    :class:`~distrepro.errors.StoreUnavailable`, and every call after it fails at once. A SQLite store
    is opened here, under :func:`~distrepro.tracking.storeprobe.first_use_lock`, so that two campaigns starting
    on a new file do not both create its tables.

    The sqlite store module is imported first under a local warnings filter: its ``noload``
    deprecation warning fires once, at import, and a process-wide filter alone does not help
    when the caller (pytest ``-W error``, ``warnings.catch_warnings``) has put ``error`` first.
    """
    quiet_first_use()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_NOLOAD_WARNING)
        import mlflow.store.tracking.sqlalchemy_store  # noqa: F401
    from mlflow import MlflowClient

    from distrepro.tracking.store_logs import hold_back_store_logs
    from distrepro.tracking.storeguard import GuardedClient, describe_fault
    from distrepro.tracking.storeprobe import first_use_lock, sqlite_path

    hold_back_store_logs()  # a store fault is distrepro's one line, not MLflow's 90-line log of it (not with --debug)

    uri = tracking_uri or resolve_tracking_uri()
    path = sqlite_path(uri)
    # MLflow opens the store (and creates a new one's tables) in the constructor: one process at a time
    with first_use_lock(path) if path is not None else contextlib.nullcontext():
        try:
            client = MlflowClient(tracking_uri=uri)
        except Exception as exc:
            fault = describe_fault(exc, uri)
            if fault is None:
                raise
            raise fault from exc
    return cast("MlflowClient", GuardedClient(client, uri))


def experiment_name(paper: str | None) -> str:
    """The suite's experiment naming convention: one experiment per paper, ``adhoc`` otherwise (a paper id that
    is not a name, ``../x``, is refused: the experiment's artifacts live in a folder of that name)."""
    return f"distrepro/{check_name(paper or 'adhoc', None, 'paper')}"


def _default_artifact_location(tracking_uri: str, experiment: str) -> str | None:
    """For a sqlite store, keep artifacts beside the DB (``<db dir>/mlartifacts/<experiment>``).

    MLflow's own default is ``<cwd>/mlruns/<id>``, which scatters artifacts wherever a command
    happened to start (and into the repo during tests). Servers choose their own location.
    """
    prefix = "sqlite:///"
    if not tracking_uri.startswith(prefix) or tracking_uri[len(prefix) :] in ("", ":memory:"):
        return None
    db_path = Path(tracking_uri[len(prefix) :]).resolve()
    slug = re.sub(r"[^\w.\-]+", "_", experiment).strip("_") or "experiment"
    return str(db_path.parent / "mlartifacts" / slug)


#: MLflow's run description (the UI shows it as the run's "Description")
DESCRIPTION_TAG = "mlflow.note.content"
#: on an arm's campaign run: the id of the ``distrepro reproduce`` run it belongs to (which holds the report). A tag,
#: not a parent link: nested under one umbrella row the arms (and their metric columns) would be hidden in the UI
REPRODUCTION_TAG = "distrepro.reproduction"


def ensure_experiment(client: MlflowClient, name: str, artifact_location: str | None = None) -> str:
    """Return the id of experiment ``name``, creating it (marked as model training) if needed.

    Two processes may race to create it (mlflow #4123): a RESOURCE_ALREADY_EXISTS from
    ``create_experiment`` means the other one won, so look it up again.
    """
    from mlflow.exceptions import MlflowException

    exp = client.get_experiment_by_name(name)
    if exp is None:
        try:
            return client.create_experiment(
                name,
                artifact_location=artifact_location,
                tags={EXPERIMENT_KIND_TAG: MODEL_TRAINING_KIND, **view_tags()},
            )
        except MlflowException as exc:
            if exc.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise TrackingError(f"experiment {name!r} exists but cannot be read")
    if exp.lifecycle_stage != "active":
        raise TrackingError(
            f"MLflow experiment {name!r} (id {exp.experiment_id}) is deleted; restore it with "
            f"'mlflow experiments restore --experiment-id {exp.experiment_id}' or remove it for good "
            "with 'mlflow gc'"
        )
    if exp.tags.get(EXPERIMENT_KIND_TAG) != MODEL_TRAINING_KIND:  # made before distrepro set the kind
        client.set_experiment_tag(exp.experiment_id, EXPERIMENT_KIND_TAG, MODEL_TRAINING_KIND)
    ensure_views(client, exp.experiment_id, exp.tags)  # the views every printed link opens, as this version draws them
    return exp.experiment_id


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
        self.artifact_location = artifact_location or _default_artifact_location(self.tracking_uri, experiment)
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
