"""The report's text sections as Markdown: tables, runs, environment, deviations (the claims: claims_sections).

Kept apart from the figures and from the orchestration so each piece can be read (and tested) on
its own. All input comes from the tidy run table: the environment block in particular is built
from the tags every run carries (``git.*``, ``versions.*``, ``host.*``, ``distrepro.*``,
``time.*``), so it states what produced *these* runs, not what is installed now.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from distrepro import metrics as M
from distrepro.claims.verdicts import fmt

_MD_SPECIAL = str.maketrans({"|": "\\|", "*": "\\*", "\n": " ", "\r": " "})


def cell(value: Any) -> str:
    """A table cell: pipes escaped, one line (Markdown tables cannot hold either); ``*`` escaped so a
    formula such as ``1 - n*min(v)/sum(v)`` in an ideal's label is not rendered as emphasis."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return str(value).translate(_MD_SPECIAL)


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    if not rows:
        return "_none_\n"
    frame = pd.DataFrame([{c: cell(r.get(c)) for c in columns} for r in rows], columns=list(columns))
    return frame.to_markdown(index=False, disable_numparse=True) + "\n"


def runs_table(runs: pd.DataFrame, labels: Mapping[str, str]) -> str:
    rows = []
    frame = runs.assign(arm=runs["run_id"].map(labels))
    for (arm, profile), g in frame.groupby(["arm", "profile"], dropna=False):
        done = g[g["status"] == "FINISHED"]

        def med(col: str, done: pd.DataFrame = done) -> str:
            return fmt(float(done[col].median())) if col in done and done[col].notna().any() else "–"

        reached = done[M.TARGET_REACHED].dropna() if M.TARGET_REACHED in done else pd.Series(dtype=float)
        rows.append(
            {
                "arm": arm,
                "method": ", ".join(sorted(g["method"].unique())),
                "profile": profile,
                "runs": len(g),
                "finished": len(done),
                "seeds": ", ".join(str(s) for s in sorted(g["seed"].unique())),
                "final val_accuracy (median)": med(M.final(M.VAL_ACCURACY)),
                "emulated s for budget (median)": med(M.FINAL_EMULATED_S),
                "target reached": f"{int(reached.sum())}/{len(reached)}" if len(reached) else "–",
                "time to target s (median)": med(M.TIME_TO_TARGET_S),
            }
        )
    return table(rows, list(rows[0]) if rows else [])


def _per_worker(done: pd.DataFrame, field: str) -> pd.DataFrame:
    """The ``worker/<r>/<field>`` columns (one per worker)."""
    return done[[c for c in done.columns if re.fullmatch(rf"worker/\d+/{field}", str(c))]]


def time_bounds_table(runs: pd.DataFrame, labels: Mapping[str, str]) -> str:
    """Each arm's emulated time beside two compute bounds, from what every run logged.

    *balanced*: samples / Σ declared device speeds, the compute time of a perfect split with no
    communication (no method beats it); *slowest device's compute*: the largest per-worker compute
    time, which lockstep training (DDP) waits for at every step. Medians over finished seeds.
    """
    rows = []
    frame = runs.assign(arm=runs["run_id"].map(labels))
    for arm, g in frame.groupby("arm"):
        done = g[g["status"] == "FINISHED"]
        speeds = _per_worker(done, "declared_samples_per_s")
        compute, comm = _per_worker(done, "compute_s"), _per_worker(done, "comm_s")
        if done.empty or speeds.empty or compute.empty or M.FINAL_SAMPLES not in done:
            continue
        balanced = done[M.FINAL_SAMPLES] / speeds.sum(axis=1)
        total = done[M.FINAL_EMULATED_S]
        rows.append(
            {
                "arm": arm,
                "emulated time s": fmt(float(total.median())),
                "balanced compute bound s": fmt(float(balanced.median())),
                "time / balanced": f"{float((total / balanced).median()):.2f}×",
                "slowest device's compute s": fmt(float(compute.max(axis=1).median())),
                "most communication s (one device)": fmt(float(comm.max(axis=1).median())) if not comm.empty else "–",
            }
        )
    return table(rows, list(rows[0])) if rows else ""


def _values(runs: pd.DataFrame, col: str) -> str:
    if col not in runs:
        return "–"
    vals = sorted({str(v) for v in runs[col].dropna() if str(v) != ""})
    if not vals:
        return "–"
    return vals[0] if len(vals) == 1 else "several: " + ", ".join(vals)


def caveats(runs: pd.DataFrame) -> str:
    """The first screen's one paragraph on what the verdicts rest on: what was real, what was emulated."""
    profiles = ", ".join(f"`{p}`" for p in sorted(runs["profile"].dropna().astype(str).unique())) or "–"
    charged = _values(runs, "tags.time.charged_workload")
    return (
        f"**What these verdicts rest on.** Training ran for real on this machine (accuracy and loss are measured on "
        f"a small proxy model); time and bytes are *emulated* on the hardware profile(s) {profiles}, built from "
        f"public specifications, with compute charged as {charged}. Timing verdicts therefore depend on those "
        "profiles: a zero-width interval on a timing claim means the emulated clock is deterministic, not that the "
        "verdict is certain; `distrepro report --sensitivity` shows which hardware assumption would flip it. "
        "Details: [Environment](#environment)."
    )


def diverged(runs: pd.DataFrame) -> str:
    """A paragraph naming the runs whose loss went to NaN or infinity (tag ``distrepro.diverged``, set when the run
    ended), or ``""`` when none did: their accuracy and loss are a diverged model's, whatever a verdict makes of
    them."""
    column = "tags.distrepro.diverged"
    if column not in runs.columns:
        return ""
    hit = runs[runs[column].notna()]
    if hit.empty:
        return ""
    named = [f"`{name}` ({why})" for name, why in zip(hit["run_name"], hit[column], strict=True)]
    return (
        f"**Diverged runs.** The loss of {len(named)} run(s) went to NaN or infinity: {', '.join(named)}. Their "
        "accuracy and loss are those of a diverged model; a claim judged on them judges a training that failed."
    )


def environment(runs: pd.DataFrame, labels: Mapping[str, str]) -> str:
    """What produced these runs, and the split between what was measured and what was emulated."""
    rows: list[dict[str, str]] = []
    commit = _values(runs, "tags.git.commit")
    rows.append(
        {"what": "git commit", "value": commit + (" ⚠ runs from different commits" if "several" in commit else "")}
    )
    rows.append({"what": "work tree dirty", "value": _values(runs, "tags.git.dirty")})
    for col in sorted(c for c in runs.columns if c.startswith(("tags.versions.", "tags.host."))):
        rows.append({"what": col.removeprefix("tags."), "value": _values(runs, col)})
    for what, col in (
        ("engine", "engine"),
        ("world size", "world_size"),
        ("hardware profile", "profile"),
        ("profile variant", "profile_variant"),
        ("profile sha256", "tags.distrepro.profile_sha256"),
        ("time model", "tags.time.model"),
        ("emulated workload (time charged as)", "tags.time.charged_workload"),
        ("trained proxy (accuracy measured on)", "tags.time.trained_proxy"),
        ("charged FLOPs per sample", "tags.time.flops_per_sample"),
        ("proxy FLOPs per sample", "tags.time.proxy_flops_per_sample"),
        ("bytes scale (emulated / proxy)", "tags.time.bytes_scale"),
        ("scale (paper | proxy)", "scale"),
        ("dataset", "dataset"),
        ("model", "model"),
        ("budget", "budget"),
    ):
        rows.append({"what": what, "value": _values(runs, col)})
    frame = runs.assign(arm=runs["run_id"].map(labels))
    for row in rows:
        if row["what"].startswith("scale") and row["value"] == "–":
            row["value"] = "not recorded by the runs (tag distrepro.scale); each claim's scale is assumed"
    for arm, g in frame.groupby("arm"):
        rows.append({"what": f"seeds · {arm}", "value": ", ".join(str(s) for s in sorted(g["seed"].unique()))})
    charged = _values(runs, "tags.time.charged_workload")
    proxy = _values(runs, "tags.time.trained_proxy")
    text = (
        "**Measured vs emulated.** Training runs for real on this machine: losses and accuracies are "
        f"measured on the trained proxy ({proxy}). Time is *emulated* on a virtual clock "
        f"({_values(runs, 'tags.time.model')}), charged as {charged} on the hardware profile above; "
        "wall-clock seconds (`final/wall_s`) are this machine's and are not used by any verdict."
    )
    if charged.startswith("proxy:") is False and charged != "–":
        text += (
            " The emulated workload differs from the trained proxy, so time-to-accuracy mixes the "
            "emulated workload's time with the proxy's accuracy curve."
        )
    return table(rows, ["what", "value"]) + "\n" + text + "\n"


_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")


def deviations(readme: str) -> str:
    """The README's deviations section if it has one (a heading with "deviation"), else the whole
    README, headings demoted below the report's own."""
    lines = readme.strip().splitlines()
    start = next(
        (i for i, ln in enumerate(lines) if (m := _HEADING.match(ln)) and "deviation" in m.group(2).lower()), None
    )
    if start is not None:
        level = len(_HEADING.match(lines[start]).group(1))  # type: ignore[union-attr]
        end = next(
            (j for j in range(start + 1, len(lines)) if (m := _HEADING.match(lines[j])) and len(m.group(1)) <= level),
            len(lines),
        )
        lines = lines[start + 1 : end]
    out = []
    for ln in lines:
        m = _HEADING.match(ln)
        out.append(f"{'#' * min(6, len(m.group(1)) + 3)} {m.group(2)}" if m else ln)
    return "\n".join(out).strip() + "\n"


def readme_for(method: str, logged: str | None, method_dirs: Sequence[Path], root: Path) -> tuple[str | None, str]:
    """The README a run logged (what actually ran), else the method folder's current one."""
    if logged:
        return logged, "as logged with the runs (`method_README.md`)"
    for folder in [*method_dirs, root / "methods" / method]:
        path = folder / "README.md"
        if folder.name == method and path.is_file():
            return path.read_text(encoding="utf-8"), f"from `{path}` (not logged with the runs)"
    return None, ""
