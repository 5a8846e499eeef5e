"""Metric keys in words, with their units: the one table every figure, axis label and caption reads.

A run logs ``final/val_accuracy`` or ``alloc/3/share`` (:mod:`distrepro.metrics`), names made for a
program; a reader of a figure needs "validation accuracy (%)" and "share of the data, worker 3 (%)".
:func:`describe` turns a key into a :class:`MetricLabel` (words, unit, and the factor that takes a
logged value into that unit: a fraction is shown in per cent); :func:`axis_label` and :func:`shown`
write an axis label and a number with its unit from it. A key this table does not know (a method's own
``method/<name>``) falls back to the key itself, unitless, so a new metric is shown, never hidden.

The units are those the writers log in: quality metrics per :mod:`distrepro.engine.evaluation` (loss is
the mean cross-entropy with the natural logarithm, so nats, which the captions say; accuracy a fraction of
the validation set), times in emulated or wall seconds, bytes as sent, speeds in samples per second
(:class:`distrepro.api.allocation.Allocation`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from distrepro import metrics as M


@dataclass(frozen=True)
class MetricLabel:
    """A metric as a reader names it: ``words`` and ``unit`` of a value multiplied by ``scale``.

    ``difference_unit``: the unit of a difference of two values (percentage *points* for a per cent); the same
    as ``unit`` when left empty."""

    words: str
    unit: str = ""
    scale: float = 1.0
    difference_unit: str = ""

    @property
    def diff_unit(self) -> str:
        return self.difference_unit or self.unit


_PERCENT = {"unit": "%", "scale": 100.0, "difference_unit": "pts"}

#: exact keys (a ``final/`` prefix is looked up without it, then named "final …" only where that adds meaning)
_EXACT: dict[str, MetricLabel] = {
    M.VAL_ACCURACY: MetricLabel("validation accuracy", **_PERCENT),  # type: ignore[arg-type]
    M.VAL_LOSS: MetricLabel("validation loss", "nats"),
    M.TRAIN_LOSS: MetricLabel("training loss", "nats"),
    M.CONSENSUS_DISTANCE: MetricLabel("consensus distance (1/n)·Σ‖xᵢ − x̄‖²"),
    M.LR: MetricLabel("learning rate"),
    M.EPOCH: MetricLabel("epochs", "epochs"),
    M.SAMPLES: MetricLabel("samples seen", "samples"),
    M.STEP: MetricLabel("steps", "steps"),
    M.EMULATED_S: MetricLabel("emulated time", "s"),
    M.WALL_S: MetricLabel("wall time", "s"),
    M.THROTTLED_S: MetricLabel("wall time spent paced", "s"),
    M.BYTES_TOTAL: MetricLabel("bytes sent, all workers", "MB", 1e-6),
    "emulated_s": MetricLabel("emulated time for the budget", "s"),
    "wall_s": MetricLabel("wall time for the budget", "s"),
    "epochs": MetricLabel("epochs trained", "epochs"),
    "steps": MetricLabel("steps trained", "steps"),
    "useful_flops_per_emulated_s": MetricLabel("useful work per emulated second", "TFLOP/s", 1e-12),
    "idle_fraction": MetricLabel("share of worker time idle", **_PERCENT),  # type: ignore[arg-type]
    "non_compute_fraction": MetricLabel("share of worker time not computing", **_PERCENT),  # type: ignore[arg-type]
    M.CONSENSUS_DECAY_RATE: MetricLabel("consensus-distance decay rate", "e-folds per gradient per worker"),
    M.CONSENSUS_FIT_POINTS: MetricLabel("evaluations in the consensus-decay fit", "evaluations"),
    M.CONSENSUS_LOG_AREA: MetricLabel("mean log₁₀ consensus distance", "decades"),
    M.CONSENSUS_ABOVE_FLOOR: MetricLabel("share of evaluations above the round-off floor", **_PERCENT),  # type: ignore[arg-type]
    M.TIME_TO_TARGET_S: MetricLabel("emulated time to target", "s"),
    M.STEP_TO_TARGET: MetricLabel("steps to target", "steps"),
    M.TARGET_REACHED: MetricLabel("share of runs reaching the target", **_PERCENT),  # type: ignore[arg-type]
}

#: ``worker/<r>/<field>`` and ``alloc/<r>/<field>``: words with ``{r}`` for the rank
_PER_RANK: dict[str, MetricLabel] = {
    "worker/clock_s": MetricLabel("clock of worker {r}", "s"),
    "worker/compute_s": MetricLabel("compute time of worker {r}", "s"),
    "worker/comm_s": MetricLabel("communication time of worker {r}", "s"),
    "worker/idle_s": MetricLabel("idle time of worker {r}", "s"),
    "worker/bytes_sent": MetricLabel("bytes sent by worker {r}", "MB", 1e-6),
    f"worker/{M.DECLARED_SPEED}": MetricLabel("declared speed of worker {r}", "samples/s"),
    "alloc/share": MetricLabel("share of the data, worker {r}", **_PERCENT),  # type: ignore[arg-type]
    "alloc/batch_size": MetricLabel("batch size of worker {r}", "samples"),
    "alloc/speed": MetricLabel("speed estimate of worker {r}", "samples/s"),
}
_RANKED = re.compile(r"^(worker|alloc)/(\d+|<r>)/(\w+)$")
#: the claims engine's own units (``Verdict.unit``, a convergence claim's ``unit``)
_CLAIM_UNITS: dict[str, MetricLabel] = {
    "x": MetricLabel("ratio", "×"),
    "fraction": MetricLabel("share", **_PERCENT),  # type: ignore[arg-type]
}


def describe(key: str) -> MetricLabel:
    """``key`` (a logged metric, or a claims unit such as ``x``) in words with its unit; the key itself if unknown."""
    if key in _CLAIM_UNITS:
        return _CLAIM_UNITS[key]
    name = key.removeprefix("final/")
    if name in _EXACT:
        return _EXACT[name]
    if key.startswith(M.EMU_PREFIX) and key.removeprefix(M.EMU_PREFIX) in _EXACT:
        return _EXACT[key.removeprefix(M.EMU_PREFIX)]
    ranked = _RANKED.match(key)
    if ranked and f"{ranked[1]}/{ranked[3]}" in _PER_RANK:
        base = _PER_RANK[f"{ranked[1]}/{ranked[3]}"]
        return MetricLabel(base.words.format(r=ranked[2]), base.unit, base.scale, base.difference_unit)
    replica = re.fullmatch(r"replica_(\w+?)_(mean|std|min|max)", name)
    if replica and replica[1] in _EXACT:
        base = _EXACT[replica[1]]
        return MetricLabel(f"{base.words}, {replica[2]} over replicas", base.unit, base.scale, base.difference_unit)
    return MetricLabel(key)


def axis_label(key: str, difference: bool = False) -> str:
    """``validation accuracy (%)``: the words and, where it has one, the unit (of a difference if ``difference``)."""
    label = describe(key)
    unit = label.diff_unit if difference else label.unit
    said = unit and unit in label.words.split()  # "epochs", not "epochs (epochs)"
    return f"{label.words} ({unit})" if unit and not said else label.words


def shown(value: float | None, key: str, difference: bool = False, digits: int = 4) -> str:
    """``value`` (as logged) in ``key``'s unit: ``72.4%``, ``+1.2 pts``, ``4.356 s``, ``2.31×``; ``–`` if missing."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    label = describe(key)
    unit = label.diff_unit if difference else label.unit
    if math.isinf(value):
        number = "∞" if value > 0 else "−∞"
    else:  # per cent and points to 3 digits, as the report's text gives them (43.5%, not 43.52%)
        digits = min(digits, 3) if unit in ("%", "pts") else digits
        number = f"{value * label.scale:{'+' if difference else ''}.{digits}g}".replace("-", "−")
    if not unit:
        return number
    return f"{number}{unit}" if unit in ("%", "×") else f"{number} {unit}"
