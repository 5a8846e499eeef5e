"""Every metric name a run logs: the one contract between the writers and the readers of a run.

Writers are the engines' evaluation (:mod:`distrepro.engine.evaluation`, :mod:`distrepro.engine.rank_reports`,
:mod:`distrepro.engine.loop`), the MLflow observer (:mod:`distrepro.tracking.run_observer`,
:mod:`distrepro.tracking.runlog`) and the
campaign's summaries (:mod:`distrepro.orchestration.campaign`); readers are the claims engine (:mod:`distrepro.claims`),
the report and its figures (:mod:`distrepro.report`), the sensitivity sweeps (:mod:`distrepro.sensitivity`)
and every ``paper.yaml``, whose claims name a metric. A name used on one side and not written on the
other would only show up as an INCONCLUSIVE verdict or an empty figure, so the names live here and a
claim naming a metric no writer produces is refused when its ``paper.yaml`` is loaded
(:func:`unknown_metric`).

The families, with ``<r>`` a rank and ``<name>`` free text:

* per evaluation, at MLflow ``step`` = global step: :data:`EVAL` and what methods record with ``ctx.record``:
  ``method/<name>`` (mean over the ranks that recorded it);
* at the final evaluation only, at its step: the per-rank values, ``worker/<r>/<field>`` for :data:`WORKER_FIELDS`
  and ``method/<name>/rank<r>`` (:func:`is_per_rank`). Every evaluation would be 5 + the method's records keys per
  rank (734 keys for a 64-worker A²CiD² run), and every reader takes the last value (the runs table, the worker
  figures, the claims); a run's ``evals.csv`` artifact keeps them at every evaluation;
* the evaluation's quality metrics against emulated time, ``emu_ms/<name>`` at ``step`` = emulated ms (the unit
  is in the name: the MLflow UI labels every x-axis "Step");
* the allocation at ``step`` = epoch index: ``alloc/<r>/<field>`` for :data:`ALLOC_FIELDS`;
* summaries at step 0: ``final/<name>`` (every evaluation metric of the final evaluation, plus
  :data:`FINAL_EXTRA`), ``worker/<r>/declared_samples_per_s``, and :data:`SUMMARIES`.
* derived by the run reader, never logged: :data:`DERIVED` (the share of time not computing, and the
  ``curve/<name>`` summaries of the consensus-distance history).

A method's own metrics need no entry here: whatever it records is ``method/<name>``, and a claim may
name any such key (the plugin owns that namespace). A new *harness* metric is added here, next to its
writer, so that its readers and claims can name it. Modules import this one as ``M`` (``metrics`` is
the usual name of the dict being filled).
"""

from __future__ import annotations

import re

# ---------------------------------------------------------------- per evaluation

VAL_LOSS = "val_loss"
VAL_ACCURACY = "val_accuracy"
TRAIN_LOSS = "train_loss"
#: parameter spread of an asynchronous method's replicas at an evaluation (distrepro.engine.evaluation)
CONSENSUS_DISTANCE = "consensus_distance"
#: the learning rate of the harness' schedule at an evaluation, when the run has one
LR = "lr"
EPOCH = "epoch"
SAMPLES = "samples"
STEP = "step"
EMULATED_S = "time/emulated_s"
WALL_S = "time/wall_s"
#: wall seconds a throttled dist run spent paced (``--engine dist`` with throttling only)
THROTTLED_S = "time/throttled_s"
BYTES_TOTAL = "comm/bytes_total"

#: quality metrics of the evaluated model and the training loss: what an evaluation's ``metrics`` holds
QUALITY = (VAL_LOSS, VAL_ACCURACY, TRAIN_LOSS, CONSENSUS_DISTANCE, LR)
#: the metrics summarised over replicas when ``eval.replicas`` is on (distrepro.engine.eval_modes)
REPLICA_METRICS = (VAL_LOSS, VAL_ACCURACY)
REPLICA_STATS = ("mean", "std", "min", "max")


def replica(name: str, stat: str) -> str:
    """``replica_<metric>_<stat>``: a statistic of ``name`` over the evaluated replicas."""
    return f"replica_{name}_{stat}"


REPLICA = tuple(replica(m, s) for m in REPLICA_METRICS for s in REPLICA_STATS)
#: every exact name logged per evaluation
EVAL = (*QUALITY, EPOCH, SAMPLES, EMULATED_S, WALL_S, THROTTLED_S, BYTES_TOTAL)
#: the clock columns every run's curve table carries, whatever else is filtered out
CURVE_CLOCKS = (EMULATED_S, WALL_S, BYTES_TOTAL)

WORKER_FIELDS = ("clock_s", "compute_s", "comm_s", "idle_s", "bytes_sent")
DECLARED_SPEED = "declared_samples_per_s"
ALLOC_FIELDS = ("share", "batch_size", "speed")


def worker(rank: int, field: str) -> str:
    """``worker/<rank>/<field>``: one rank's accounting (per evaluation) or declared speed (summary)."""
    return f"worker/{rank}/{field}"


def method(name: str) -> str:
    """``method/<name>``: a value a method recorded with ``ctx.record`` (or ``<name>/rank<r>``, one rank's)."""
    return f"method/{name}"


def per_rank(name: str, rank: int) -> str:
    """``<name>/rank<rank>``: one rank's own value of a recorded ``name``, logged beside the mean."""
    return f"{name}/rank{rank}"


_PER_RANK = re.compile(rf"worker/\d+/(?:{'|'.join(WORKER_FIELDS)})|method/.+/rank\d+")


def is_per_rank(name: str) -> bool:
    """Whether ``name`` is one rank's value at an evaluation (``worker/<r>/<field>``, ``method/<name>/rank<r>``):
    logged at the final evaluation only, so it has no curve to read a target off."""
    return _PER_RANK.fullmatch(name) is not None


#: prefix of the series against emulated time; ``_ms`` because the step they are logged at is emulated milliseconds
EMU_PREFIX = "emu_ms/"


def emu(name: str) -> str:
    """``emu_ms/<name>``: an evaluation metric logged at step = emulated milliseconds."""
    return f"{EMU_PREFIX}{name}"


def alloc(rank: int, field: str) -> str:
    """``alloc/<rank>/<field>``: the data allocation, logged at step = epoch index."""
    return f"alloc/{rank}/{field}"


# ---------------------------------------------------------------- summaries (step 0)


def final(name: str) -> str:
    """``final/<name>``: a metric of the final evaluation, or a whole-run summary."""
    return f"final/{name}"


FINAL_EMULATED_S = final("emulated_s")
FINAL_WALL_S = final("wall_s")
FINAL_SAMPLES = final("samples")
FINAL_EPOCHS = final("epochs")
FINAL_STEPS = final("steps")
#: useful work per emulated second (samples x model FLOPs per sample / emulated time)
FINAL_USEFUL_FLOPS = final("useful_flops_per_emulated_s")
#: the share of all workers' clock time spent waiting (A²CiD²'s "reduces idle time")
FINAL_IDLE_FRACTION = final("idle_fraction")
#: the share of all workers' clock time not spent computing gradients (idle + blocking communication): what
#: A²CiD²'s Figure 2 shows. Not logged: derived by the run reader (distrepro.claims.runs) from worker/<r>/*
FINAL_NON_COMPUTE_FRACTION = final("non_compute_fraction")


def curve(name: str) -> str:
    """``curve/<name>``: a per-run summary of a logged curve (a decay rate, an area), derived, never logged."""
    return f"curve/{name}"


#: summaries of the consensus-distance history (distrepro.claims.curve_summary), derived by the run reader
#: (distrepro.claims.runs), so that convergence-speed claims read how fast the distance falls, not its last value:
#: the decay rate (e-folds per gradient per worker, fitted above the round-off floor), the points that fit used,
#: the mean log10 distance over the run (the area under the log curve per unit of window) and the share of the
#: evaluations above the floor
CONSENSUS_DECAY_RATE = curve("consensus_decay_rate")
CONSENSUS_FIT_POINTS = curve("consensus_fit_points")
CONSENSUS_LOG_AREA = curve("consensus_log_area")
CONSENSUS_ABOVE_FLOOR = curve("consensus_above_floor")
CURVE_SUMMARIES = (CONSENSUS_DECAY_RATE, CONSENSUS_FIT_POINTS, CONSENSUS_LOG_AREA, CONSENSUS_ABOVE_FLOOR)
DERIVED = (FINAL_NON_COMPUTE_FRACTION, *CURVE_SUMMARIES)
FINAL_EXTRA = (
    FINAL_EMULATED_S,
    FINAL_WALL_S,
    FINAL_SAMPLES,
    FINAL_EPOCHS,
    FINAL_STEPS,
    FINAL_USEFUL_FLOPS,
    FINAL_IDLE_FRACTION,
)

TIME_TO_TARGET_S = "time_to_target_s"
STEP_TO_TARGET = "step_to_target"
TARGET_REACHED = "target_reached"
SUMMARIES = (TIME_TO_TARGET_S, STEP_TO_TARGET, TARGET_REACHED)

#: prefixes of series that are not per-evaluation curves of the run as a whole
NOT_CURVES = ("final/", EMU_PREFIX, "alloc/", "worker/", "method/")

# ---------------------------------------------------------------- what a claim may name

_EXACT = frozenset(
    (*EVAL, *REPLICA, STEP, *(final(m) for m in (*QUALITY, *REPLICA)), *FINAL_EXTRA, *SUMMARIES, *DERIVED)
)
_PATTERNS = (
    re.compile(rf"worker/\d+/(?:{'|'.join([*WORKER_FIELDS, DECLARED_SPEED])})"),
    re.compile(rf"alloc/\d+/(?:{'|'.join(ALLOC_FIELDS)})"),
    re.compile(rf"emu_ms/(?:{'|'.join(QUALITY)})"),
    re.compile(r"method/[^/\s]+(?:/[^/\s]+)*"),  # a method's own ctx.record keys (and their /rank<r>)
)
#: the families as a reader would write them, for error messages and docs
FAMILIES = (
    "worker/<r>/<field>",
    "alloc/<r>/<field>",
    "emu_ms/<quality metric>",
    "final/<quality metric>",
    "method/<name>",
)


def is_known(name: str) -> bool:
    """Whether some writer logs ``name`` (exactly, or as a member of one of the :data:`FAMILIES`)."""
    return name in _EXACT or any(p.fullmatch(name) for p in _PATTERNS)


def unknown_metric(name: str) -> str | None:
    """Why a claim may not name ``name`` (a one-line message), or None when some writer logs it.

    A claim's metric is looked up as written, then as ``final/<name>`` (``val_accuracy`` means the
    final one), so a bare quality metric is known too.
    """
    if is_known(name):
        return None
    leaf = name.rsplit("/", 1)[-1]
    close = sorted(n for n in _EXACT if leaf and (leaf in n or n.rsplit("/", 1)[-1] in leaf))[:3]
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    where = "see distrepro/metrics.py; a method's own values: method/<name>"
    return f"unknown metric {name!r}: {hint}no run logs it ({where})"
