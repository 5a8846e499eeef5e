"""Buffered writer for one MLflow run, and the suite's only flattening routine.

Import these from :mod:`distrepro.tracking.mlflow_client`; they live here only to keep modules short. Nothing in
this module imports mlflow at import time, so :mod:`distrepro.tracking.mlflow_client` can set MLflow's environment
first.

On the default sqlite store one ``log_metric`` costs 7–10 ms and a 1000-metric ``log_batch`` about
0.15 s (measured with MLflow 3.17.2 on a 2-vCPU machine: 1000 ``log_metric`` calls took 6.5–10.2 s,
one ``log_batch`` of 1000 points 0.14–0.20 s), hence the buffering.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import posixpath
import re
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from distrepro import metrics as M
from distrepro.errors import DistreproError, StoreUnavailable, TrackingError

if TYPE_CHECKING:
    from mlflow import MlflowClient

_log = logging.getLogger(__name__)

RunStatus = Literal["FINISHED", "FAILED", "KILLED"]

MAX_METRICS_PER_BATCH = 1000  # mlflow.utils.validation.MAX_METRICS_PER_BATCH
MAX_PARAMS_TAGS_PER_BATCH = 100  # mlflow.utils.validation.MAX_PARAMS_TAGS_PER_BATCH
MAX_PARAM_VAL_LENGTH = 6000  # mlflow.utils.validation.MAX_PARAM_VAL_LENGTH
MAX_TAG_VAL_LENGTH = 8000  # mlflow.utils.validation.MAX_TAG_VAL_LENGTH
MAX_KEY_LENGTH = 250  # mlflow.utils.validation.MAX_ENTITY_KEY_LENGTH
TRUNCATION_MARKER = "...[truncated by distrepro]"
# MLflow's rule for metric/param/tag names on POSIX (mlflow.utils.validation).
_VALID_KEY = re.compile(r"^[/\w.\- :]*$")


def flatten(nested: Any, prefix: str = "") -> dict[str, Any]:
    """Flatten mappings, lists/tuples, dataclasses and pydantic models into dotted keys.

    ``{"opt": {"lr": 0.1}, "devs": [{"n": 2}]}`` → ``{"opt.lr": 0.1, "devs.0.n": 2}``. Empty
    containers stay as leaves so their key is not silently lost. The single flattening routine
    of the suite: params, provenance tags and result tables must agree on key spelling.
    """
    if not isinstance(nested, type):
        if callable(getattr(nested, "model_dump", None)):
            nested = nested.model_dump(mode="json")
        elif dataclasses.is_dataclass(nested) and not isinstance(nested, type):
            nested = dataclasses.asdict(nested)
    if isinstance(nested, Mapping):
        items: list[tuple[Any, Any]] = list(nested.items())
    elif isinstance(nested, list | tuple):
        items = list(enumerate(nested))
    elif prefix:
        return {prefix: nested}
    else:
        raise TypeError(f"flatten needs a mapping, sequence or model at top level, got {nested!r}")
    if not items:
        return {prefix: nested} if prefix else {}
    out: dict[str, Any] = {}
    for key, value in items:
        out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def flatten_params(nested: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """:func:`flatten`, with every leaf stringified (``None`` → ``"None"``), as MLflow stores them."""
    return {key: str(value) for key, value in flatten(nested, prefix).items()}


def _truncate(value: str, limit: int) -> str:
    if len(value) <= limit:
        return value
    return value[: limit - len(TRUNCATION_MARKER)] + TRUNCATION_MARKER


def logged_params(nested: Mapping[str, Any]) -> dict[str, str]:
    """Params exactly as :meth:`RunLogger.log_params` stores them (flattened, stringified, cut to
    MLflow's length): what a comparison with a logged run (``--resume``) must compare."""
    return {k: _truncate(v, MAX_PARAM_VAL_LENGTH) for k, v in flatten_params(nested).items()}


def check_key(key: str, kind: str) -> None:
    """Reject a name MLflow would reject, at the call site rather than at a later flush."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"{kind} name must be a non-empty string, got {key!r}")
    norm = posixpath.normpath(key)  # MLflow also refuses names that a path would rewrite
    if (
        len(key) > MAX_KEY_LENGTH
        or not _VALID_KEY.match(key)
        or norm != key
        or norm == "."
        or norm.startswith(("..", "/"))
    ):
        raise ValueError(
            f"invalid {kind} name {key!r}: use at most {MAX_KEY_LENGTH} characters from letters, "
            "digits, '_', '-', '.', ' ', ':', '/', not changed by path normalisation"
        )


def status_for(exc_type: type[BaseException] | None, exc: BaseException | None) -> RunStatus:
    """FINISHED on success, KILLED on Ctrl-C, FAILED otherwise: a run is FINISHED only when the code that
    trains it returned, so ``sys.exit(0)`` in a plugin (which skips the rest of the budget) is FAILED too, and
    ``--resume`` trains it again."""
    if exc_type is None:
        return "FINISHED"
    if issubclass(exc_type, KeyboardInterrupt):
        return "KILLED"
    return "FAILED"


#: the largest step MLflow's SQL stores hold (a BIGINT)
_MAX_STEP = 2**63 - 1


def check_system_metrics() -> None:
    """Fail at once, in one line, when ``--system-metrics`` cannot work (no ``psutil``)."""
    import importlib.util

    if importlib.util.find_spec("psutil") is None:
        raise DistreproError("--system-metrics needs psutil: pip install 'distrepro[system-metrics]' (or psutil)")


def start_system_metrics(run_id: str, options: Mapping[str, Any]) -> Any:
    """MLflow's system-metrics sampler (CPU, memory, disk, network; GPU where there is one) for ``run_id``,
    every 10 s, as ``system/*`` metrics (``--system-metrics``). It needs ``psutil`` (the ``system-metrics``
    extra); without it the error says how to get it, before any training."""
    check_system_metrics()
    from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

    # every 10 s unless MLflow's own setting says otherwise (MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL)
    interval = float(os.environ.get("MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL") or 10)
    monitor = SystemMetricsMonitor(
        run_id, sampling_interval=interval, samples_before_logging=1, tracking_uri=options.get("tracking_uri")
    )
    monitor.start()
    return monitor


class RunLogger:
    """The single writer of one MLflow run.

    Metric points are buffered and written with ``log_batch`` (≤ 1000 per call) when
    :meth:`flush` or :meth:`finish` is called, when more than ``max_buffer`` points wait, or on
    the first logging call after ``flush_every_s`` seconds (so a long run shows progress in the
    UI; ``None`` disables the timer). Each point keeps the wall time of its logging call, so the
    UI's wall-time axis is right despite the delay. Params, tags and artifacts are written at once.
    Not thread-safe: one logger per run, used from one thread.
    """

    def __init__(
        self,
        client: MlflowClient,
        run_id: str,
        *,
        flush_every_s: float | None = 30.0,
        max_buffer: int = 5000,
        system_metrics: Mapping[str, Any] | None = None,
    ) -> None:
        self._client = client
        self.run_id = run_id
        self.flush_every_s = flush_every_s
        self.max_buffer = max_buffer
        self._buffer: list[tuple[str, float, int, int]] = []  # key, value, timestamp ms, step
        self._last_flush = time.monotonic()
        self._valid_keys: set[str] = set()
        self.status: RunStatus | None = None  # set by finish()
        #: the run's end in ms since the epoch, when it is not "now": a campaign run ends when its last cell did, not
        #: when the process got round to closing it (under an executor every arm closes at the very end)
        self.end_time_ms: int | None = None
        self._monitor = start_system_metrics(run_id, system_metrics) if system_metrics is not None else None

    @property
    def closed(self) -> bool:
        return self.status is not None

    @property
    def pending(self) -> int:
        """Number of metric points buffered and not yet written."""
        return len(self._buffer)

    def _ensure_open(self) -> None:
        if self.closed:
            raise RuntimeError(f"run {self.run_id} is already finished ({self.status})")

    def log_params(self, flat: Mapping[str, Any]) -> None:
        """Log params; nested values are flattened, values stringified and cut to 6000 characters.

        MLflow refuses to change a param once logged; logging the same value again is harmless.
        """
        from mlflow.entities import Param

        self._ensure_open()
        items = logged_params(flat)
        for key in items:
            check_key(key, "param")
        params = [Param(k, v) for k, v in items.items()]
        for i in range(0, len(params), MAX_PARAMS_TAGS_PER_BATCH):
            self._client.log_batch(self.run_id, params=params[i : i + MAX_PARAMS_TAGS_PER_BATCH])

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        """Set tags (values stringified, cut to MLflow's 8000 characters); later values win."""
        from mlflow.entities import RunTag

        self._ensure_open()
        for key in tags:
            check_key(key, "tag")
        run_tags = [RunTag(k, _truncate(str(v), MAX_TAG_VAL_LENGTH)) for k, v in tags.items()]
        for i in range(0, len(run_tags), MAX_PARAMS_TAGS_PER_BATCH):
            self._client.log_batch(self.run_id, tags=run_tags[i : i + MAX_PARAMS_TAGS_PER_BATCH])

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        """Buffer one point per key at ``step``. NaN is stored as NaN; on sqlite ±inf comes back
        as ±1.797e308 (MLflow's substitution, since SQL has no infinity)."""
        self._ensure_open()
        now_ms = int(time.time() * 1000)
        step = int(step)
        points = []
        for key, value in metrics.items():  # validate everything before buffering anything
            if key not in self._valid_keys:
                check_key(key, "metric")
                self._valid_keys.add(key)
            try:
                points.append((key, float(value), now_ms, step))
            except (TypeError, ValueError) as exc:
                raise ValueError(f"metric {key!r}: value {value!r} is not a number") from exc
        self._buffer.extend(points)
        if len(self._buffer) >= self.max_buffer or (
            self.flush_every_s is not None and time.monotonic() - self._last_flush >= self.flush_every_s
        ):
            self.flush()

    def log_emulated(self, metrics: Mapping[str, float], emulated_s: float) -> None:
        """Log ``emu/<key>`` at step = emulated milliseconds: the UI's stand-in for an emulated-time axis.

        Steps are int64, so even a year of emulated time fits; what does not (9.2e15 s, a profile figure wrong
        by orders of magnitude that :mod:`distrepro.orchestration.budget_check` did not foresee) is one line
        rather than SQLite's "Python int too large" after the run.
        """
        if not math.isfinite(emulated_s) or emulated_s < 0 or emulated_s * 1000 > _MAX_STEP:
            raise TrackingError(
                f"emulated time {emulated_s!r} s cannot be logged (MLflow steps are 64-bit: at most "
                f"{_MAX_STEP / 1000:.3g} s of emulated ms); a hardware profile figure is far off"
            )
        self.log_metrics({M.emu(k): v for k, v in metrics.items()}, step=round(emulated_s * 1000))

    def log_summary(self, metrics: Mapping[str, float]) -> None:
        """Final scalars at step 0 (the UI's run table shows each key's latest value)."""
        self.log_metrics(metrics, step=0)

    def flush(self) -> None:
        """Write buffered points. On a store error the unwritten points stay buffered and it raises."""
        from mlflow.entities import Metric

        while self._buffer:
            chunk = self._buffer[:MAX_METRICS_PER_BATCH]
            self._client.log_batch(self.run_id, metrics=[Metric(k, v, ts, s) for k, v, ts, s in chunk])
            del self._buffer[: len(chunk)]
        self._last_flush = time.monotonic()

    def log_dict(self, obj: Any, artifact_file: str) -> None:
        """Write ``obj`` as JSON or YAML, chosen by the suffix of ``artifact_file`` (MLflow's rule)."""
        self._ensure_open()
        self._client.log_dict(self.run_id, obj, artifact_file)

    def log_text(self, text: str, artifact_file: str) -> None:
        self._ensure_open()
        self._client.log_text(self.run_id, text, artifact_file)

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        self._ensure_open()
        self._client.log_artifact(self.run_id, str(path), artifact_path)

    def log_figure(self, fig: Any, artifact_file: str) -> None:
        """Save a matplotlib (or plotly) figure as an artifact; the caller still owns/closes ``fig``."""
        self._ensure_open()
        self._client.log_figure(self.run_id, fig, artifact_file)

    def finish(self, status: RunStatus = "FINISHED") -> None:
        """Flush, then mark the run terminated. Idempotent.

        If the flush fails the run is still terminated, as FAILED, and the flush error is raised:
        a run must never stay RUNNING forever because its last batch could not be written.
        """
        if self.closed:
            return
        if status not in ("FINISHED", "FAILED", "KILLED"):
            raise ValueError(f"status must be FINISHED, FAILED or KILLED, got {status!r}")
        error: Exception | None = None
        if self._monitor is not None:  # its last samples go in before the run is closed
            self._monitor.finish()
            self._monitor = None
        try:
            self.flush()
        except Exception as exc:
            error, status = exc, "FAILED"
        self._client.set_terminated(self.run_id, status, end_time=self.end_time_ms)
        self.status = status
        if error is not None:
            raise error

    def __enter__(self) -> RunLogger:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Literal[False]:
        if exc_type is None:
            self.finish("FINISHED")
            return False
        if isinstance(exc, StoreUnavailable):
            return False  # the store is gone: nothing to close; the run stays as the store last saw it
        try:  # an error while closing must not hide the error that got us here
            self.finish(status_for(exc_type, exc))
        except StoreUnavailable:
            pass  # the store went away while closing: the error that got us here says enough
        except Exception:
            _log.exception("could not close MLflow run %s", self.run_id)
        return False
