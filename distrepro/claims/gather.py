"""Evidence gathering: from a tidy run table (and curves) to per-seed values of each arm a claim reads.

Per seed, the newest FINISHED run counts (a rerun replaces an earlier one). A claim with an explicit
quality ``target`` reads the per-evaluation curves (the first evaluation that meets it); the others
read one summary column per run. Nothing here decides anything: :mod:`distrepro.claims.verdicts`
turns what this module gathers into a verdict, and the sensitivity sweep re-uses the selection.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from distrepro import metrics as M
from distrepro.claims.schema import PaperSpec
from distrepro.claims.table_key import table_key
from distrepro.tracking.runlog import flatten_params

#: claim unit → curve column
UNIT_COLUMN = {
    "emulated": M.EMULATED_S,
    "emulated_s": M.EMULATED_S,
    "wall": M.WALL_S,
    "steps": "step",
    "epochs": M.EPOCH,
    "samples": M.SAMPLES,
}
_TARGET_SUMMARIES = {M.TIME_TO_TARGET_S, M.STEP_TO_TARGET}


def _same(logged: Any, wanted: Any) -> bool:
    if logged is None or (isinstance(logged, float) and math.isnan(logged)):
        return False
    if str(logged) == str(wanted):
        return True
    try:
        return math.isclose(float(logged), float(wanted))
    except (TypeError, ValueError):
        return False


def select_arm(runs: pd.DataFrame, spec: PaperSpec, name: str, profile: str | None, scale: str | None) -> pd.DataFrame:
    """Rows of ``runs`` that belong to arm ``name`` on ``profile`` (any profile if ``None``).

    The hardware check re-judges every claim at each of its settings on copies of one run table whose time columns
    alone differ, so the rows are memoised on everything they are picked by: the arm's method, campaign and
    parameters, ``profile``, ``scale``, the table's labels and the contents of the columns read (:func:`_mask_key`);
    a table that differs in any of these is matched afresh."""
    arm = spec.arm(name)
    wanted = flatten_params({"method_params": arm.params}) if arm.params else {}
    key = _mask_key(runs, arm, wanted, profile, scale)
    try:
        mask = _MASKS.get(key)
    except TypeError:  # a cell that cannot be a key part (a list): matched afresh
        return runs[_arm_mask(runs, arm, wanted, profile, scale)]
    if mask is None:
        mask = _arm_mask(runs, arm, wanted, profile, scale)
        if len(_MASKS) >= _MASKS_KEPT:
            _MASKS.clear()
        _MASKS[key] = mask
    return runs[mask]


#: select_arm's rows by :func:`_mask_key` (a report's arms × claims' profiles and scales; cleared when full)
_MASKS: dict[tuple[Any, ...], Any] = {}
_MASKS_KEPT = 512
_NAN = object()  # NaN as a key part: a NaN is not equal to itself, so tuples holding one would never match


def _mask_key(
    runs: pd.DataFrame, arm: Any, wanted: dict[str, Any], profile: str | None, scale: str | None
) -> tuple[Any, ...]:
    cols = ["method", "profile", "scale", "campaign", *(f"params.{k}" for k in wanted)]
    read = tuple(c for c in cols if c in runs)
    values = tuple(
        tuple(_NAN if x is pd.NA or (isinstance(x, float) and x != x) else x for x in runs[c].tolist()) for c in read
    )
    spec_part = (arm.method, arm.campaign, tuple((k, type(w).__name__, repr(w)) for k, w in wanted.items()))
    return (spec_part, profile, scale, read, tuple(runs.index.tolist()), values)


def _arm_mask(runs: pd.DataFrame, arm: Any, wanted: dict[str, Any], profile: str | None, scale: str | None) -> Any:
    """The boolean row mask of :func:`select_arm` (a NumPy array: a missing value never selects)."""
    mask = runs["method"] == arm.method
    if profile is not None:
        mask &= runs["profile"] == profile
    if scale is not None and "scale" in runs:  # runs that do not record a scale are taken as the claim's
        mask &= runs["scale"].fillna(scale).replace("", scale) == scale
    if arm.campaign is not None:
        mask &= runs.get("campaign", pd.Series(None, index=runs.index)) == arm.campaign
    for key, want in wanted.items():
        col = f"params.{key}"
        mask &= runs[col].map(lambda x, w=want: _same(x, w)) if col in runs else False
    return mask.to_numpy(dtype=bool, na_value=False)


def latest_per_seed(rows: pd.DataFrame) -> tuple[pd.DataFrame, dict[int, str]]:
    """Per seed the newest FINISHED run (indexed by seed), and the status of seeds with none.

    Called for every arm of every claim, and again at each of the hardware check's settings (a thousand times in a
    report, two in three on a table equal to one seen before): the answer is memoised on the table's exact content
    (:func:`distrepro.claims.table_key.table_key`: labels, dtypes and the bits of every cell), and each caller gets
    its own copy of the memo's frame, so changing it changes nothing else. Building that frame from the picked rows
    (pandas infers each column's dtype anew) is most of the cost."""
    key = table_key(rows)
    found = _LATEST.get(key) if key is not None else None
    if found is None:
        found = _pick_latest(rows)
        if key is not None:
            if len(_LATEST) >= _LATEST_KEPT:
                _LATEST.clear()
            _LATEST[key] = found
    frame, bad = found
    return frame.copy(deep=False), dict(bad)  # copy-on-write: a change to it copies first


#: latest_per_seed's answers by table content (a report's distinct arm tables; cleared when full)
_LATEST: dict[tuple[Any, ...], tuple[pd.DataFrame, dict[int, str]]] = {}
_LATEST_KEPT = 512


def _pick_latest(rows: pd.DataFrame) -> tuple[pd.DataFrame, dict[int, str]]:
    """:func:`latest_per_seed` computed: the rows picked from the seed and status lists in one pass, not a pandas
    group per seed (the same rows, in the same order, built into the frame the same way); a seed column that is
    not numeric is grouped by pandas as before (:func:`_latest_by_group`)."""
    order = rows.sort_values("start_time", kind="stable") if "start_time" in rows else rows
    if order["seed"].dtype.kind not in "iuf":
        return _latest_by_group(order, rows)
    finished: dict[Any, int] = {}
    last: dict[Any, Any] = {}
    for pos, (seed, status) in enumerate(zip(order["seed"].tolist(), order["status"].tolist(), strict=True)):
        if seed != seed:  # NaN: no group (pandas drops it)
            continue
        last[seed] = status
        if isinstance(status, str) and status == "FINISHED":
            finished[seed] = pos
    picked, bad = [], {}
    for seed in sorted(last):  # the groups' order (sort=True)
        if seed in finished:
            picked.append(order.iloc[finished[seed]])
        else:
            bad[int(seed)] = str(last[seed])
    frame = pd.DataFrame(picked).set_index("seed", drop=False) if picked else rows.iloc[0:0]
    return frame, bad


def _latest_by_group(order: pd.DataFrame, rows: pd.DataFrame) -> tuple[pd.DataFrame, dict[int, str]]:
    """:func:`latest_per_seed` by a pandas group per seed (``order``: ``rows`` sorted by start time)."""
    picked, bad = [], {}
    for seed, group in order.groupby("seed", sort=True):
        done = group[group["status"] == "FINISHED"]
        if len(done):
            picked.append(done.iloc[-1])
        else:
            bad[int(seed)] = str(group["status"].iloc[-1])
    frame = pd.DataFrame(picked).set_index("seed", drop=False) if picked else rows.iloc[0:0]
    return frame, bad


# ---------------------------------------------------------------- per-seed values


def metric_column(runs: pd.DataFrame, metric: str) -> str | None:
    """``metric`` if the table has it, else ``final/<metric>`` (so ``val_accuracy`` means the final one)."""
    for col in (metric, M.final(metric)):
        if col in runs.columns:
            return col
    return None


def crossing(curve: pd.DataFrame, metric: str, value: float, direction: str, unit_col: str) -> tuple[float, bool]:
    """``(unit value at the first evaluation meeting the target, True)``; else ``(last unit value, False)``."""
    curve = curve.sort_values("step")
    hit = curve[metric] >= value if direction == "max" else curve[metric] <= value
    if hit.any():
        return float(curve.loc[hit.idxmax(), unit_col]), True
    return float(curve[unit_col].max()), False


def seed_values(
    claim: Any, rows: pd.DataFrame, curves: pd.DataFrame | None, metric: str | None
) -> tuple[dict[int, float], dict[int, float], list[int]]:
    """``(values, censored, missing)`` per seed: reached values, lower bounds of unreached ones, seeds without data."""
    values: dict[int, float] = {}
    censored: dict[int, float] = {}
    missing: list[int] = []
    target = getattr(claim, "target", None)
    if target is not None:  # read the curves: convergence, or speedup to an explicit target
        unit_col = UNIT_COLUMN[getattr(claim, "unit", None) or claim.clock]
        for seed, row in rows.iterrows():
            curve = None if curves is None else curves[curves["run_id"] == row["run_id"]]
            if curve is None or curve.empty or target.metric not in curve or unit_col not in curve:
                missing.append(int(seed))
                continue
            curve = curve.dropna(subset=[target.metric, unit_col])
            if curve.empty:
                missing.append(int(seed))
                continue
            v, ok = crossing(curve, target.metric, target.value, target.direction, unit_col)
            (values if ok else censored)[int(seed)] = v
        return values, censored, missing
    col = metric_column(rows, metric) if metric else None
    for seed, cell, reached in _summary_cells(rows, col):
        if col in _TARGET_SUMMARIES and reached is not None and not pd.isna(reached) and float(reached) == 0:
            censored[int(seed)] = math.inf
        elif cell is None or pd.isna(cell):
            missing.append(int(seed))
        else:
            values[int(seed)] = float(cell)
    return values, censored, missing


def _summary_cells(rows: pd.DataFrame, col: str | None) -> Any:
    """Per row ``(seed, cell of col, cell of target_reached)``, ``None`` for a column the table lacks.

    Read as column lists (one pass each), not a Series per row (``iterrows``, most of the cost of a call made for
    every arm of every claim at each hardware setting): the same values, since a row Series holds the same Python
    objects (a float column's cells are the same floats) or, in an all-numeric table, NumPy floats of equal value.
    A table whose labels repeat (a label then names several cells) is read row by row as before."""
    if not rows.columns.is_unique:
        return ((seed, row.get(col) if col else None, row.get(M.TARGET_REACHED)) for seed, row in rows.iterrows())
    n = len(rows)
    cells = rows[col].tolist() if col and col in rows else [None] * n
    reached = rows[M.TARGET_REACHED].tolist() if M.TARGET_REACHED in rows else [None] * n
    return zip(rows.index.tolist(), cells, reached, strict=True)


def claim_metric(claim: Any) -> str | None:
    if claim.kind == "speedup" and claim.target is None:
        if claim.measure == "time_to_target":
            return M.TIME_TO_TARGET_S
        return M.FINAL_EMULATED_S if claim.clock == "emulated" else M.FINAL_WALL_S
    return getattr(claim, "metric", None)
