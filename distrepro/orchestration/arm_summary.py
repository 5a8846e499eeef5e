"""What an arm's parent run shows in the MLflow runs table: each summary metric over its seeds.

A campaign's parent run stands for one arm (one config over its seeds). Without metrics of its own
the MLflow runs table has no metric columns for it and the chart view has nothing to draw, so a
user has to expand every arm to compare them. After the seeds, the parent gets, for each summary
metric its finished child runs share (``final/*`` and the time-to-target summaries), the mean over
seeds under the same key (so parents and children fill one column) and the bounds of its 95 %
Student-t interval as ``<key>/ci95_low`` and ``<key>/ci95_high`` (the interval the claims use for
one sample of per-seed values, :func:`distrepro.claims.intervals.t_interval`), plus ``seeds_finished``.
These are descriptive: verdicts are the report's, tagged on the parents once it is built.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from distrepro import metrics as M

LEVEL = 0.95
LOW, HIGH = "/ci95_low", "/ci95_high"
SEEDS_FINISHED = "seeds_finished"
#: short names of the columns the runs-table view shows: ``final/val_accuracy/ci95_low`` and ``…/ci95_high`` both
#: truncate to ``final/val_accura…`` in a column header, ``acc_lo95`` and ``acc_hi95`` do not. Their values are
#: rounded to :data:`SHOWN_DIGITS` significant digits (a column of 0.718749999 reads as noise)
SHORT = {"final/val_accuracy": "acc", "final/emulated_s": "emu_s"}
SHOWN_DIGITS = 4


def shown(value: float, digits: int = SHOWN_DIGITS) -> float:
    """``value`` to ``digits`` significant digits."""
    return float(f"{value:.{digits}g}") if math.isfinite(value) else value


def short_columns(summary: Mapping[str, float]) -> dict[str, float]:
    """``acc_mean``, ``acc_lo95``, ``acc_hi95`` (and ``emu_s_*``) from the long keys of ``summary``, rounded."""
    out = {}
    for key, short in SHORT.items():
        for suffix, name in (("", "mean"), (LOW, "lo95"), (HIGH, "hi95")):
            if key + suffix in summary:
                out[f"{short}_{name}"] = shown(summary[key + suffix])
    return out


def is_summary(key: str) -> bool:
    """A per-seed summary a parent aggregates (``final/*``, time to target), not a series or a rank's value."""
    return (key.startswith("final/") and not key.endswith((LOW, HIGH))) or key in M.SUMMARIES


def aggregate(per_seed: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Mean and 95 % t-interval bounds of every summary metric present in all of ``per_seed`` (one
    mapping per finished seed), and their short, rounded copies (:data:`SHORT`). One seed gives the mean only: an
    interval needs a spread."""
    from distrepro.claims.intervals import t_interval

    if not per_seed:
        return {}
    keys = sorted(set.intersection(*(set(filter(is_summary, m)) for m in per_seed)))
    out: dict[str, float] = {SEEDS_FINISHED: float(len(per_seed))}
    for key in keys:
        values = [float(m[key]) for m in per_seed]
        if not all(math.isfinite(v) for v in values):
            continue
        out[key] = sum(values) / len(values)
        if len(values) > 1:
            out[key + LOW], out[key + HIGH] = t_interval(values, LEVEL)
    return {**out, **short_columns(out)}


def describe_parent(arm: str, n_seeds: int) -> str:
    """The parent run's description (MLflow's run note), saying what its metrics are."""
    return (
        f"Arm `{arm}`: one child run per seed ({n_seeds} planned), named `{arm}/s<seed>`. The metrics of this run "
        f"are over its finished seeds: each `final/*` key is the mean, `<key>{LOW}` and `<key>{HIGH}` the bounds of "
        f"its {round(LEVEL * 100)} % Student-t interval. Claim verdicts are the tags `verdict.<claim>` once the "
        "report is built."
    )


CHILD_DESCRIPTION = (
    f"One seed of one arm. Series `{M.EMU_PREFIX}*` are logged at step = emulated milliseconds (the chart's "
    "'Step' axis is emulated time in ms); other series at step = training step; `final/*` are this seed's summaries."
)


def log_arm_summary(campaign: Any) -> dict[str, float]:
    """Aggregate the finished child runs of ``campaign`` (a started
    :class:`distrepro.tracking.campaign_run.Campaign`; resumed seeds included: they are read back from the store)
    onto its parent run; returns what was logged."""
    done = [r.data.metrics for r in campaign.children() if r.info.status == "FINISHED"]
    summary = aggregate(done)
    if summary:
        campaign.parent.log_summary(summary)
    return summary
