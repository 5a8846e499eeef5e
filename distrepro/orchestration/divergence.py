"""A run whose loss went to NaN or infinity is named as diverged: a tag on its run, which the report reads.

Why a tag: a NaN loss is logged as a metric like any other and the run ends FINISHED; in the table the report reads,
a NaN is also what a metric never logged looks like, so the report could not tell "diverged" from "not measured"
and said nothing (its accuracy verdicts silently judged a diverged model). Deciding it once, where the run's result
is in hand, makes it a fact of the run.
"""

from __future__ import annotations

import math

from distrepro import metrics as M
from distrepro.job.results import RunResult

#: tag on a seed's run whose loss went to NaN or infinity: which loss, and at which evaluation first
DIVERGED_TAG = "distrepro.diverged"
_LOSSES = (M.VAL_LOSS, M.TRAIN_LOSS)


def divergence(result: RunResult) -> str | None:
    """``"val_loss nan at step 40"`` for the first evaluation whose loss is not finite, or None."""
    for record in [*result.evals, result.final]:
        for key in _LOSSES:
            value = record.metrics.get(key)
            if value is not None and not math.isfinite(value):
                return f"{key} {value} at step {record.step}"
    return None
