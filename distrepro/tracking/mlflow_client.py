"""MLflow for the suite: the store a command writes to, its client, and the experiments campaigns log into.

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
statistics to rank 0. A campaign's parent and child runs: :class:`~distrepro.tracking.campaign_run.Campaign`; a
run's buffered logger: :mod:`distrepro.tracking.runlog` (its names are handed on from here too).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, cast

from distrepro.errors import StoreUnavailable, TrackingError
from distrepro.names import check_name
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
    "RunLogger",
    "RunStatus",
    "StoreUnavailable",
    "TrackingError",
    "default_artifact_location",
    "ensure_experiment",
    "experiment_name",
    "flatten",
    "flatten_params",
    "make_client",
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


def default_artifact_location(tracking_uri: str, experiment: str) -> str | None:
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
