"""The columns of a runs table that the verdicts of a paper's claims read.

Why: a report's runs table has a few hundred columns (the params of every arm's method, tags, per-worker clocks,
allocation series), and the verdict code (:mod:`distrepro.claims.verdicts`) selects and copies whole rows per claim
and per arm: judging the same claims on only the columns a verdict reads gives the same verdicts several times
faster (C-ADP's report at proxy: 12 claims in 0.11 instead of 0.58 s of CPU; the timing check's ~330 judgements).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from distrepro import metrics as M
from distrepro.claims.schema import PaperSpec
from distrepro.tracking.runlog import flatten_params

_IDENTITY = ("run_id", "method", "profile", "scale", "campaign", "seed", "status", "start_time")
_TIMES = (M.FINAL_EMULATED_S, M.FINAL_USEFUL_FLOPS, M.FINAL_SAMPLES, *M.SUMMARIES)


def needed_columns(spec: PaperSpec, claims: Sequence[Any]) -> set[str]:
    """What the verdicts of ``claims`` read: identity, the arms' method params, the time columns and the
    claims' metrics. A table of a few hundred per-worker, tag and config columns made each judgement ~3x slower."""
    params = {f"params.{k}" for arm in spec.setup.arms.values() for k in flatten_params({"method_params": arm.params})}
    names = [m for c in claims if (m := getattr(c, "metric", None))]
    metrics = {*names, *(M.final(m) for m in names)}
    return {*_IDENTITY, *_TIMES, *params, *metrics}


def judged_table(spec: PaperSpec, runs: pd.DataFrame) -> pd.DataFrame:
    """``runs`` as the verdicts of every claim of ``spec`` read it: the :func:`needed_columns` of its claims, every
    ``final/`` summary, and every column the spec names anywhere (a regime condition's metric, a convergence
    target's), in the table's order. The report judges on it; its verdicts equal those on the whole table (checked
    on every paper's stored proxy and mid runs when this was written, and by the tests on a wide table)."""
    named = spec.model_dump_json()
    need = needed_columns(spec, spec.claims)
    keep = [c for c in runs.columns if c in need or c.startswith("final/") or c in named]
    return runs if len(keep) == len(runs.columns) else runs[keep]
