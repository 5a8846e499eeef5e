"""The report's text sections as Markdown: claims table and details, runs, environment, deviations.

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
from distrepro.claims.evidence import group_of, tally
from distrepro.claims.intervals import CI_LABELS
from distrepro.claims.schema import Claim, PaperSpec, claimed_bounds
from distrepro.claims.verdicts import Verdict, fmt

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


def _claim_unit(claim: Any) -> str:
    if claim.kind == "speedup" or (claim.kind == "relative_improvement" and claim.form == "ratio"):
        return "x"
    if claim.kind == "relative_improvement":
        return "fraction" if claim.form == "fraction" else claim.metric
    if claim.kind == "convergence":
        return claim.unit
    return getattr(claim, "metric", "")


def claimed_text(claim: Any) -> str:
    unit = _claim_unit(claim)
    if claim.kind == "ordering":
        return (" > " if claim.direction == "max" else " < ").join(claim.arms) + f" on {claim.metric}"
    if claim.kind == "non_inferiority":
        kind = "" if claim.margin_kind == "abs" else " × baseline"
        return f"{claim.arm} ≥ {claim.baseline} − {fmt(claim.margin)}{kind} on {claim.metric}"
    lo, hi = claimed_bounds(claim.claimed) or (math.nan, math.nan)
    value = fmt(lo, unit) if lo == hi else f"{fmt(lo, unit)} – {fmt(hi, unit)}"
    suffix = f" {claim.unit}" if claim.kind == "convergence" else ""
    return value + suffix


def source_text(claim: Any) -> str:
    src = claim.source
    text = src.ref or src.kind
    return f'{text}: "{src.quote}"' if src.quote else text


def evidence_text(claim: Any) -> str:
    """``origin`` of the claim and, where it says more, where its number comes from (``evidence``)."""
    if claim.origin == claim.evidence:
        return claim.origin
    return f"{claim.origin} (number {claim.evidence})"


def reproduced_text(v: Verdict, level: float) -> str:
    if v.statistic is None:
        return "–"
    out = ("≥ " if v.statistic_name.startswith("lower bound") else "") + fmt(v.statistic, v.unit)
    if v.ci is not None and all(math.isfinite(c) for c in v.ci) and v.ci[0] != v.ci[1]:
        out += f" [{fmt(v.ci[0], v.unit)}, {fmt(v.ci[1], v.unit)}] ({round(level * 100)}% CI)"
    return out + f", n={v.n_seeds}"


def claims_table(spec: PaperSpec, verdicts: Sequence[Verdict], claims: Sequence[Any] | None = None) -> str:
    """One row per claim (``claims``: a subset of ``spec.claims``, default all); a claim decided by
    the model's structure gets a ``why it cannot vary`` column."""
    by_id = {v.claim_id: v for v in verdicts}
    chosen = list(spec.claims if claims is None else claims)
    structural = any(c.decided_by == "model_structure" for c in chosen)
    rows = []
    for claim in chosen:
        v = by_id[claim.id]
        ideal = f"{fmt(claim.ideal.value, _claim_unit(claim))} ({claim.ideal.label})" if claim.ideal else "–"
        rows.append(
            {
                "claim": f"{claim.id}: {claim.statement}" if claim.statement else claim.id,
                "kind": claim.kind,
                "source": source_text(claim),
                "evidence": evidence_text(claim),
                "claimed": claimed_text(claim),
                "reproduced": reproduced_text(v, claim.accept.ci),
                "ideal": ideal,
                "scale": f"{claim.scale}" + (" · out of regime" if v.out_of_regime else ""),
                "verdict": v.verdict,
                "reason": v.reason,
                "why it cannot vary": claim.why,
            }
        )
    cols = ["claim", "kind", "source", "evidence", "claimed", "reproduced", "ideal", "scale", "verdict", "reason"]
    return table(rows, [*cols, "why it cannot vary"] if structural else cols)


_GROUPS = {
    "headline": (
        "The paper's claims (headline)",
        "As the paper states them, each decided by a measurement on the emulated cluster.",
    ),
    "derived": (
        "Derived and reconstructed readings",
        "Computed from the paper's numbers (derived) or our reading of what it says without a number or a "
        "baseline (reconstructed): they re-use the headline's evidence, so they are not counted in it.",
    ),
    "structural": (
        "Decided by the model's structure",
        "Claims the emulator can only decide one way, whatever the runs do (the last column says why): "
        "their verdicts describe the model, not the paper, and are not counted in the headline.",
    ),
}


def tally_text(spec: PaperSpec, verdicts: Sequence[Verdict]) -> str:
    """The report's verdict line, headline first (see :mod:`distrepro.claims.evidence`)."""
    t = tally(spec.claims, verdicts)
    where = f"profile `{spec.setup.profile or 'any'}`, scale `{spec.setup.scale}`"
    lines = [
        f"**Headline: {t.text(t.of('headline'))}** of the paper's {t.total('headline')} claims as it states "
        f"them, decided by measurement ({where})."
    ]
    others = [
        f"{t.text(t.of(g))} {label}"
        for g, label in (
            ("derived", "derived/reconstructed readings"),
            ("structural", "decided by the model's structure"),
        )
        if t.total(g)
    ]
    if others:
        lines.append(f"Also judged, not in the headline: {'; '.join(others)}.")
    outside = t.out_of_regime_total()
    if outside:
        lines.append(
            f"{outside} INCONCLUSIVE verdict(s) are outside the paper's regime (a regime condition unmet, or arms "
            "that tie on every seed): the runs cannot show the paper's effect, which is no evidence against it."
        )
    scales = sorted({c.scale for c in spec.claims if c.scale})
    if len(scales) > 1:
        per = ", ".join(f"{sum(c.scale == s for c in spec.claims)} at `{s}`" for s in scales)
        lines.append(f"Claims decided per scale: {per} (column `scale`).")
    lines.append(
        f"All {len(verdicts)} claims: {t.text(t.all_claims())}. Comparisons are paired by seed (a seed index gives "
        "every arm the same initial model and data order); the CI decides a verdict under `rule: ci`."
    )
    return " ".join(lines)


def grouped_claims_tables(spec: PaperSpec, verdicts: Sequence[Verdict]) -> str:
    """One claims table per evidence group, the headline first."""
    out = []
    for group, (title, caption) in _GROUPS.items():
        claims = [c for c in spec.claims if group_of(c) == group]
        if claims:
            out += [f"### {title}", "", f"_{caption}_", "", claims_table(spec, verdicts, claims)]
    return "\n".join(out)


def _arms_of(claim: Any) -> str:
    if claim.kind == "ordering":
        return "arms " + ", ".join(f"`{a}`" for a in claim.arms)
    base = getattr(claim, "baseline", None)
    return f"arm `{claim.arm}`" + (f" vs baseline `{base}`" if base else "")


def claim_details(spec: PaperSpec, verdicts: Sequence[Verdict]) -> str:
    """Per claim: what was compared where, the statistic and acceptance band, and every seed's value."""
    by_id = {v.claim_id: v for v in verdicts}
    out = []
    for claim in spec.claims:
        v = by_id[claim.id]
        acc = claim.accept
        lines = [f"#### {claim.id} · {claim.kind} · **{v.verdict}**", ""]
        if claim.statement:
            lines += [f"> {claim.statement}", ""]
        lines.append(
            f"- {_arms_of(claim)} · profile `{claim.profile or 'any'}` · scale `{claim.scale}` · "
            f"origin `{claim.origin}` · evidence `{claim.evidence}` · decided by `{claim.decided_by}` · "
            f"source {source_text(claim)}"
        )
        if claim.why:
            lines.append(f"- why it cannot vary: {claim.why}")
        tol = f"abs ±{acc.abs_tolerance:g}, rel ±{acc.rel_tolerance:g}, {acc.sided}, rule `{acc.rule}`"
        method = CI_LABELS.get(v.ci_method or acc.ci_method or "", "interval")
        resamples = f" ({acc.n_boot} resamples)" if (v.ci_method or acc.ci_method) != "t" else ""
        lines.append(
            f"- statistic: {v.statistic_name or acc.statistic}; {round(acc.ci * 100)}% {method}{resamples}"
            f"; at least {acc.min_seeds} seeds; "
            f"tolerance {tol}"
        )
        if v.band is not None:
            lines.append(f"- acceptance band: [{fmt(v.band[0], v.unit)}, {fmt(v.band[1], v.unit)}]")
        lines.append(f"- decided at scale `{claim.scale}`; verdict reason: {v.reason}")
        lines += regime_lines(claim, v)
        if claim.notes:
            lines.append(f"- notes: {claim.notes}")
        arms = list(dict.fromkeys([*v.per_seed, *v.censored]))
        seeds = sorted({s for d in (*v.per_seed.values(), *v.censored.values()) for s in d} | set(v.points))
        if seeds:
            rows = []
            for s in seeds:
                row: dict[str, Any] = {"seed": s}
                for arm in arms:
                    cens = v.censored.get(arm, {})
                    row[arm] = (
                        f"≥ {fmt(cens[s])} (target not reached)" if s in cens else fmt(v.per_seed.get(arm, {}).get(s))
                    )
                if v.points and len(v.per_seed) > 1:
                    row["per-seed value"] = fmt(v.points.get(s), v.unit)
                rows.append(row)
            cols = ["seed", *arms] + (["per-seed value"] if v.points and len(v.per_seed) > 1 else [])
            lines += ["", table(rows, cols)]
        out.append("\n".join(lines))
    return "\n\n".join(out) + "\n"


def regime_lines(claim: Any, v: Verdict) -> list[str]:
    """The claim's regime checks (suite/claims/regime.py), measured on the deciding runs; a condition
    the verdict stopped before (an earlier one unmet, or arms missing) is listed as not checked."""
    if not claim.regime:
        return []
    done = {c.id: c for c in v.regime}
    lines = ["- regime checks (from the paper's setting, fixed before the runs):"]
    for cond in claim.regime:
        check = done.get(cond.id)
        text = check.text() if check is not None else f"{cond.what}: not checked"
        lines.append(f"  - `{cond.id}`: {text} — source: {cond.source}")
    return lines


def conflicts_section(spec: PaperSpec) -> str:
    """Claims the paper makes that cannot all hold under the checker's definitions (declared in YAML)."""
    seen, lines = set(), []
    by_id: dict[str, Claim] = {c.id: c for c in spec.claims}
    for c in spec.claims:
        for other in c.conflicts_with:
            pair = tuple(sorted((c.id, other)))
            if pair in seen:
                continue
            seen.add(pair)
            notes = "; ".join(n for n in (c.notes, by_id[other].notes) if n)
            lines.append(f"- **{pair[0]}** and **{pair[1]}**" + (f": {notes}" if notes else ""))
    return "\n".join(lines) + "\n" if lines else ""


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
