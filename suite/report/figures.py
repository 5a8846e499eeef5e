"""The report's figures, drawn headless (Agg) with seaborn styling from the tidy run tables.

Every function takes tables already read from MLflow (:mod:`suite.claims.runs`) plus a run → arm
label map, writes one PNG and returns its path, or returns ``None`` when the runs hold nothing to
draw (a method without allocation metrics, no timeline artifact): a missing panel is better than
an empty or misleading one. Bands are over seeds (min–max, median line), because with the 2–5
seeds a reproduction affords a standard-error band would suggest more certainty than there is.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from suite.claims.verdicts import Verdict, fmt

SPAN_COLORS = {"compute": "#4C72B0", "comm": "#DD8452", "idle": "#C7C7C7"}
VERDICT_COLORS = {"PASS": "#2E7D32", "FAIL": "#C62828", "INCONCLUSIVE": "#8D6E00"}
_WORKER = re.compile(r"^worker/(\d+)/(clock_s|compute_s|comm_s|idle_s|bytes_sent)$")
DPI = 110


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return path


def _palette(labels: Sequence[str]) -> dict[str, Any]:
    return dict(zip(labels, sns.color_palette("colorblind", max(len(labels), 1)), strict=False))


def curves_figure(
    curves: pd.DataFrame,
    labels: Mapping[str, str],
    x: str,
    path: Path,
    metrics: Sequence[str] = ("val_accuracy", "val_loss"),
) -> Path | None:
    """Quality vs ``x`` per arm: median over seeds, min–max band (curves interpolated on the union of x)."""
    data = curves[curves["run_id"].isin(list(labels))]
    metrics = [m for m in metrics if m in data.columns and data[m].notna().any()]
    if data.empty or x not in data.columns or not metrics:
        return None
    order = sorted(set(labels.values()))
    colors = _palette(order)
    sns.set_theme(style="whitegrid", context="paper")
    fig, axes = plt.subplots(1, len(metrics), figsize=(5.2 * len(metrics), 3.6), squeeze=False)
    for ax, metric in zip(axes[0], metrics, strict=True):
        for label in order:
            runs = [r for r, lab in labels.items() if lab == label]
            series = []
            for run in runs:
                c = data[data["run_id"] == run].dropna(subset=[x, metric]).sort_values(x)
                if len(c):
                    series.append((c[x].to_numpy(float), c[metric].to_numpy(float)))
            if not series:
                continue
            grid = np.unique(np.concatenate([s[0] for s in series]))
            stack = np.vstack([np.interp(grid, sx, sy, left=np.nan, right=np.nan) for sx, sy in series])
            with np.errstate(all="ignore"):
                med, lo, hi = np.nanmedian(stack, 0), np.nanmin(stack, 0), np.nanmax(stack, 0)
            ax.plot(grid, med, marker="o", ms=3, color=colors[label], label=f"{label} (n={len(series)})")
            if len(series) > 1:
                ax.fill_between(grid, lo, hi, color=colors[label], alpha=0.2, linewidth=0)
        ax.set_xlabel({"time/emulated_s": "emulated time (s)", "epoch": "epochs"}.get(x, x))
        ax.set_ylabel(metric)
    axes[0][0].legend(fontsize=8)
    return _save(fig, path)


def _claim_panel(ax: Any, v: Verdict, claim: Any) -> None:
    scale = 100.0 if v.unit == "fraction" else 1.0
    claimed = getattr(claim, "claimed", None)
    claimed_vals = (
        [c * scale for c in (claimed if isinstance(claimed, tuple) else (claimed,))] if claimed is not None else []
    )
    ideal = claim.ideal.value * scale if claim.ideal is not None else None
    points = np.array(list(v.points.values()), dtype=float) * scale
    ci = [c * scale for c in v.ci] if v.ci is not None and all(math.isfinite(c) for c in v.ci) else []
    band = [b * scale for b in v.band] if v.band is not None else []
    s = v.statistic * scale  # type: ignore[operator]
    seen = [s, *points, *ci, *claimed_vals, *[b for b in band if math.isfinite(b)]] + (
        [ideal] if ideal is not None else []
    )
    lo, hi = min(seen), max(seen)
    pad = 0.12 * (hi - lo) if hi > lo else max(abs(hi) * 0.1, 1e-9)
    ylim = (lo - pad, hi + pad)
    if band:  # an open band edge (one-sided, or a threshold) is drawn to the edge of the panel
        ax.axhspan(max(band[0], ylim[0]), min(band[1], ylim[1]), color="#2E7D32", alpha=0.12, label="acceptance band")
    for c in claimed_vals:
        ax.axhline(c, color="black", lw=1.2, label="claimed")
    if ideal is not None:
        ax.axhline(ideal, color="#6A1B9A", lw=1.2, ls="--", label=f"ideal: {claim.ideal.label}")
    if len(points):
        ax.scatter(np.full(len(points), -0.15), points, s=18, color="#555555", zorder=3, label="per seed")
    color = VERDICT_COLORS[v.verdict]
    if ci:
        err = [[max(s - ci[0], 0)], [max(ci[1] - s, 0)]]
        ax.errorbar([0.15], [s], yerr=err, fmt="o", color=color, capsize=4, zorder=4, label="statistic, CI")
    else:
        ax.scatter([0.15], [s], color=color, zorder=4, label="statistic (lower bound)")
    ax.set_ylim(*ylim)
    ax.set_xlim(-0.6, 0.6)
    ax.set_xticks([])
    ax.set_ylabel({"x": "ratio (×)", "fraction": "%"}.get(v.unit, v.unit))
    bound = "≥ " if v.statistic_name.startswith("lower bound") else ""
    ax.set_title(f"{v.claim_id}: {v.verdict} ({bound}{fmt(v.statistic, v.unit)})", color=color, fontsize=9)
    handles, names = ax.get_legend_handles_labels()
    unique = dict(zip(names, handles, strict=True))
    ax.legend(unique.values(), unique.keys(), fontsize=6, loc="best")


def claims_figure(verdicts: Sequence[Verdict], claims: Mapping[str, Any], path: Path) -> Path | None:
    """One panel per judged claim: per-seed points, statistic with CI, acceptance band, claimed, ideal."""
    shown = [v for v in verdicts if v.statistic is not None and math.isfinite(v.statistic)]
    if not shown:
        return None
    sns.set_theme(style="whitegrid", context="paper")
    cols = min(3, len(shown))
    rows = math.ceil(len(shown) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.0 * rows), squeeze=False)
    for ax in axes.flat[len(shown) :]:
        ax.set_visible(False)
    for ax, v in zip(axes.flat, shown, strict=False):
        _claim_panel(ax, v, claims[v.claim_id])
    fig.tight_layout()
    return _save(fig, path)


def _finished(runs: pd.DataFrame, labels: Mapping[str, str]) -> pd.DataFrame:
    done = runs[(runs["status"] == "FINISHED") & runs["run_id"].isin(list(labels))]
    return done.assign(arm=done["run_id"].map(labels))


def time_figure(runs: pd.DataFrame, labels: Mapping[str, str], path: Path) -> Path | None:
    """Emulated time to finish the budget and to reach the target, per arm (median bar, seeds as dots)."""
    done = _finished(runs, labels)
    cols = [c for c in ("final/emulated_s", "time_to_target_s") if c in done and done[c].notna().any()]
    if done.empty or not cols:
        return None
    sns.set_theme(style="whitegrid", context="paper")
    fig, axes = plt.subplots(1, len(cols), figsize=(4.6 * len(cols), 3.4), squeeze=False)
    order = sorted(done["arm"].unique())
    for ax, col in zip(axes[0], cols, strict=True):
        sns.barplot(
            done, x="arm", y=col, order=order, estimator="median", errorbar=None, ax=ax, alpha=0.6, color="#4C72B0"
        )
        sns.stripplot(done, x="arm", y=col, order=order, ax=ax, color="black", size=4)
        ax.set_xlabel("")
        ax.set_ylabel({"final/emulated_s": "emulated time for the budget (s)"}.get(col, "emulated time to target (s)"))
        ax.tick_params(axis="x", rotation=20)
    fig.tight_layout()
    return _save(fig, path)


def speedup_figure(
    runs: pd.DataFrame,
    labels: Mapping[str, str],
    baseline: str,
    marks: Mapping[str, list[tuple[str, str, float]]],
    path: Path,
) -> Path | None:
    """Speedup of every arm over ``baseline`` (paired by seed; bar = geometric mean), claimed values marked.

    ``marks``: arm → (claim id, ``"budget"`` or ``"to target"``, claimed value), drawn over that bar.
    """
    done = _finished(runs, labels)
    rows = []
    for col, what in (("final/emulated_s", "budget"), ("time_to_target_s", "to target")):
        if col not in done:
            continue
        base = done[done["arm"] == baseline].set_index("seed")[col]
        for arm, g in done[done["arm"] != baseline].groupby("arm"):
            for seed, t in g.set_index("seed")[col].items():
                if seed in base.index and t > 0 and base[seed] > 0:
                    rows.append({"arm": arm, "time": what, "seed": seed, "speedup": base[seed] / t})
    if not rows:
        return None
    frame = pd.DataFrame(rows)
    sns.set_theme(style="whitegrid", context="paper")
    fig, ax = plt.subplots(figsize=(max(4.5, 1.6 * frame["arm"].nunique() * frame["time"].nunique()), 3.6))
    gmean = frame.groupby(["arm", "time"])["speedup"].apply(lambda s: float(np.exp(np.log(s).mean()))).reset_index()
    order = sorted(frame["arm"].unique())
    hues = [h for h in ("budget", "to target") if h in set(frame["time"])]
    sns.barplot(gmean, x="arm", y="speedup", hue="time", order=order, hue_order=hues, ax=ax, alpha=0.6)
    sns.stripplot(
        frame,
        x="arm",
        y="speedup",
        hue="time",
        order=order,
        hue_order=hues,
        dodge=True,
        ax=ax,
        palette="dark:black",
        size=4,
        legend=False,
    )
    ax.axhline(1.0, color="grey", lw=1)
    width = 0.8 / len(hues)
    for i, arm in enumerate(order):
        for cid, measure, value in marks.get(arm, []):
            if measure in hues:
                left = i - 0.4 + hues.index(measure) * width
                ax.hlines(value, left, left + width, color="black", lw=2)
                ax.annotate(f"claimed {cid}: {value:g}×", (left + width, value), fontsize=7, va="bottom")
    ax.set_xlabel("")
    ax.set_ylabel(f"speedup vs {baseline} (×)")
    return _save(fig, path)


def _window(tl: pd.DataFrame, max_steps: int) -> pd.DataFrame:
    """The first steps, stretched to include two communications (so the pattern is visible), ≤ max_steps."""
    steps = sorted(tl["step"].unique())
    comm_steps = sorted(tl.loc[tl["kind"] == "comm", "step"].unique())
    last = max(steps[: min(4, len(steps))][-1], comm_steps[1] if len(comm_steps) > 1 else steps[0])
    last = min(last, steps[min(len(steps), max_steps) - 1])
    return tl[tl["step"] <= last]


def timeline_figure(timelines: Mapping[str, pd.DataFrame], path: Path, max_steps: int = 8) -> Path | None:
    """Per-worker Gantt chart of compute / comm / idle over the first steps of one run per arm."""
    items = [(arm, tl) for arm, tl in sorted(timelines.items()) if tl is not None and not tl.empty]
    if not items:
        return None
    sns.set_theme(style="white", context="paper")
    fig, axes = plt.subplots(
        len(items),
        1,
        figsize=(9, 0.5 + 0.45 * sum(t["rank"].nunique() for _, t in items) + 0.6 * len(items)),
        squeeze=False,
    )
    for ax, (arm, tl) in zip(axes[:, 0], items, strict=True):
        tl = _window(tl, max_steps)
        ranks = sorted(tl["rank"].unique())
        for kind, color in SPAN_COLORS.items():
            for i, r in enumerate(ranks):
                spans = tl[(tl["rank"] == r) & (tl["kind"] == kind)]
                ax.broken_barh(
                    list(zip(spans["start_s"] * 1e3, (spans["end_s"] - spans["start_s"]) * 1e3, strict=True)),
                    (i - 0.4, 0.8),
                    facecolors=color,
                    label=kind if i == 0 else None,
                )
        ax.set_yticks(range(len(ranks)), [f"worker {r}" for r in ranks])
        ax.invert_yaxis()
        ax.set_title(f"{arm}: steps {int(tl['step'].min())}–{int(tl['step'].max())}", fontsize=9)
        ax.set_xlabel("emulated time (ms)")
    axes[0, 0].legend(loc="lower right", bbox_to_anchor=(1.0, 1.02), fontsize=7, ncol=3, frameon=False)
    fig.tight_layout()
    return _save(fig, path)


def _worker_frame(done: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for col in done.columns:
        m = _WORKER.match(col)
        if m:
            for arm, v in done.groupby("arm")[col].mean().items():
                rows.append({"arm": arm, "rank": int(m.group(1)), "field": m.group(2), "value": v})
    return pd.DataFrame(rows, columns=["arm", "rank", "field", "value"])


def breakdown_figure(runs: pd.DataFrame, labels: Mapping[str, str], path: Path) -> Path | None:
    """Stacked compute / comm / idle seconds per worker, one panel per arm (mean over seeds)."""
    frame = _worker_frame(_finished(runs, labels))
    frame = frame[frame["field"].isin(["compute_s", "comm_s", "idle_s"])]
    if frame.empty:
        return None
    arms = sorted(frame["arm"].unique())
    sns.set_theme(style="whitegrid", context="paper")
    fig, axes = plt.subplots(1, len(arms), figsize=(3.6 * len(arms), 3.2), squeeze=False, sharey=True)
    for ax, arm in zip(axes[0], arms, strict=True):
        wide = frame[frame["arm"] == arm].pivot(index="rank", columns="field", values="value").fillna(0.0)
        bottom = np.zeros(len(wide))
        for field, kind in (("compute_s", "compute"), ("comm_s", "comm"), ("idle_s", "idle")):
            vals = wide.get(field, pd.Series(0.0, index=wide.index)).to_numpy()
            ax.bar(wide.index.astype(str), vals, bottom=bottom, color=SPAN_COLORS[kind], label=kind)
            bottom += vals
        ax.set_title(arm, fontsize=9)
        ax.set_xlabel("worker")
    axes[0, 0].set_ylabel("emulated seconds")
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, path)


def allocation_figure(runs: pd.DataFrame, alloc: pd.DataFrame, labels: Mapping[str, str], path: Path) -> Path | None:
    """Share of the data per worker (last epoch; mean over seeds), the share of the summed speed a
    speed-aware split was based on (black ticks), and the shares' course over epochs if they moved."""
    a = alloc[alloc["run_id"].isin(list(labels))].assign(arm=lambda d: d["run_id"].map(labels))
    if a.empty or a["share"].isna().all():
        return None
    last = a[a["epoch"] == a.groupby("run_id")["epoch"].transform("max")]
    moving = a.groupby(["run_id", "rank"])["share"].nunique().max() > 1
    sns.set_theme(style="whitegrid", context="paper")
    fig, axes = plt.subplots(1, 2 if moving else 1, figsize=(9 if moving else 5, 3.4), squeeze=False)
    sns.barplot(last, x="rank", y="share", hue="arm", errorbar=None, ax=axes[0, 0])
    if "speed" in last and last["speed"].notna().any():  # what a speed-aware split was based on
        based = last.dropna(subset=["speed"])
        based = based.assign(speed_share=based["speed"] / based.groupby("run_id")["speed"].transform("sum"))
        marks = based.groupby("rank")["speed_share"].mean()
        axes[0, 0].scatter(marks.index, marks.values, marker="_", s=300, color="black", zorder=5, label="speed share")
        axes[0, 0].legend(fontsize=7)
    axes[0, 0].set_xlabel("worker")
    axes[0, 0].set_ylabel("share of the data (last epoch)")
    if moving:
        sns.lineplot(a, x="epoch", y="share", hue="arm", style="rank", errorbar=None, ax=axes[0, 1])
        axes[0, 1].set_ylabel("share")
        axes[0, 1].legend(fontsize=6)
    fig.tight_layout()
    return _save(fig, path)


def comm_figure(runs: pd.DataFrame, labels: Mapping[str, str], path: Path) -> Path | None:
    """Bytes sent in total (per arm, seeds as dots) and per worker (mean over seeds)."""
    done = _finished(runs, labels)
    if done.empty or "comm/bytes_total" not in done:
        return None
    per_worker = _worker_frame(done)
    per_worker = per_worker[per_worker["field"] == "bytes_sent"]
    sns.set_theme(style="whitegrid", context="paper")
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4), squeeze=False)
    order = sorted(done["arm"].unique())
    total = done.assign(mb=done["comm/bytes_total"] / 1e6)
    sns.barplot(total, x="arm", y="mb", order=order, estimator="median", errorbar=None, ax=axes[0, 0], alpha=0.6)
    sns.stripplot(total, x="arm", y="mb", order=order, ax=axes[0, 0], color="black", size=4)
    axes[0, 0].set_ylabel("MB sent, all workers")
    axes[0, 0].set_xlabel("")
    if not per_worker.empty:
        sns.barplot(per_worker.assign(mb=per_worker["value"] / 1e6), x="rank", y="mb", hue="arm", ax=axes[0, 1])
        axes[0, 1].set_xlabel("worker")
        axes[0, 1].set_ylabel("MB sent")
    else:
        axes[0, 1].set_visible(False)
    fig.tight_layout()
    return _save(fig, path)
