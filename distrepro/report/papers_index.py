"""``reports/index.html``: every paper's report in one table, with its tally, headline first.

A user who ran several reproductions wants one page that says how each paper fared before opening any
report. The page is rebuilt from the ``claims_verdict.json`` each report writes beside it, so it never
needs MLflow and always lists exactly the reports present in the folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from distrepro.report.html import render_html
from distrepro.report.sections import table
from distrepro.safe_write import write_text

INDEX = "index.html"


def _counts(verdicts: list[dict[str, Any]], group: str | None = None) -> str:
    chosen = [v for v in verdicts if group is None or v.get("group", "headline") == group]
    out = {k: sum(v.get("verdict") == k for v in chosen) for k in ("PASS", "FAIL", "INCONCLUSIVE")}
    return " · ".join(f"{n} {k}" for k, n in out.items())


def _per_scale(by_scale: dict[str, Any]) -> str:
    """``proxy: 2 PASS · 0 FAIL · 1 INCONCLUSIVE; mid (partial): …`` over the headline claims judged at each scale."""
    parts = []
    for scale, t in by_scale.items():
        label = f"{scale} (partial)" if t.get("partial") else scale
        if "all_text" in t:  # the report's own count, once per unit (distrepro.claims.shown): never recounted here
            text = t.get("headline_text") or t["all_text"]
            apart = f"; apart: {t['apart']}" if t.get("headline_text") and t.get("apart") else ""
            parts.append(f"{label}: {text}{apart}")
            continue
        counts = t.get("headline") or {}
        if not sum(counts.values()):
            counts = t.get("all") or {}
        label = f"{scale} (partial)" if t.get("partial") else scale
        parts.append(f"{label}: " + " · ".join(f"{counts.get(k, 0)} {k}" for k in ("PASS", "FAIL", "INCONCLUSIVE")))
    return "; ".join(parts) or "–"


def _row(folder: Path, data: dict[str, Any]) -> dict[str, str]:
    verdicts = data.get("verdicts", [])
    link = f"[{data.get('paper', folder.name)}]({folder.name}/report.html)"
    tallied = data.get("tally") or {}
    headline = data.get("headline") or (_counts(verdicts, "headline") if verdicts else "no claims encoded")
    if tallied.get("apart"):
        headline = f"{headline} about the paper; apart: {tallied['apart']}"
    return {
        "paper": link,
        "title": data.get("title", ""),
        "headline claims (the paper's own)": headline,
        "all claims": tallied.get("all") or (_counts(verdicts) if verdicts else "–"),
        "by scale (headline, else all)": _per_scale(data.get("by_scale") or {}),
        "runs": str(data.get("n_runs", "–")),
        "generated": data.get("generated", "–"),
    }


def write_index(reports_dir: Path) -> Path:
    """Write ``reports_dir/index.html`` (and ``index.md``) over every ``<paper>/claims_verdict.json`` there."""
    rows = []
    for path in sorted(reports_dir.glob("*/claims_verdict.json")):
        try:
            rows.append(_row(path.parent, json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError) as exc:  # one unreadable report must not hide the others
            rows.append({"paper": path.parent.name, "title": f"unreadable claims_verdict.json: {exc}"})
    cols = ["paper", "title", "headline claims (the paper's own)", "all claims", "by scale (headline, else all)"]
    cols += ["runs", "generated"]
    text = "\n".join(
        [
            "# distrepro reports",
            "",
            "One row per paper reproduced here. *Headline*: the paper's own claims as it states them, each decided "
            "by a measurement on the emulated hardware; *all claims* adds the derived, reconstructed and structural "
            "readings; *by scale*: the claims judged at each scale the paper's runs cover, counted once per unit "
            "as the report counts them (*partial*: some arm has no runs there); *apart*: verdicts about the "
            "emulated setting, a proxy or our unchecked re-implementation rather than the paper. Each report opens "
            "with one sentence per headline claim.",
            "",
            table(rows, cols) if rows else "_No reports yet: run `distrepro reproduce PAPER`._",
        ]
    )
    write_text(reports_dir, reports_dir / "index.md", text + "\n")
    return write_text(reports_dir, reports_dir / INDEX, render_html(text, reports_dir, "distrepro reports"))
