"""How often a verdict holds on fresh seeds: every claim row of RESULTS.md across its committed versions.

Each full re-run is registered on seeds no earlier record of the paper used, so two consecutive versions of
RESULTS.md are two draws of the seed set. Between some of them an input changed too (the emulator, a profile, the
claims): each paper's ``frozen-inputs`` mark says which, and this script counts apart the rows whose paper kept its
``paper.yaml`` and arm configs (the training the accuracy claims read; the emulator's inputs move timing claims
only), so the seed effect is read where the runs trained the same recipe. The training code joined the mark in
59b5ec9; before it, "same recipe" assumes it. A verdict whose interval sits near its margin is expected to move
between draws (its interval says so); one that flips PASS ↔ FAIL between draws on unchanged inputs would say the
intervals under-cover. Reads the committed files only (``git show``), so it needs no run store.

    python benchmarks/verdict_history.py [--last 6] [--rows]
"""

from __future__ import annotations

import argparse
import re
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

from distrepro.report.results_check import frozen_marks

REPO = Path(__file__).resolve().parents[1]
_SECTION = re.compile(r"^### (\S+) at (\w+) scale")
_SHORT = {"PASS": "P", "FAIL": "F", "INCONCLUSIVE": "I", "DEPENDS": "D"}


@dataclass
class Version:
    """One committed RESULTS.md: each row's verdict word and each paper's frozen-input digests."""

    commit: str
    date: str
    verdicts: dict[str, str] = field(default_factory=dict)  # "paper/scale claim" -> PASS | FAIL | ...
    inputs: dict[str, dict[str, str]] = field(default_factory=dict)  # paper -> kind -> digest (frozen-inputs mark)


def parse(text: str, commit: str = "", date: str = "") -> Version:
    """The rows of every ``### <paper> at <scale> scale`` table: the claim (first cell) and its verdict's first
    word (third cell: ``PASS · reproduced ...``, ``INCONCLUSIVE · cannot be decided``, ``DEPENDS ...``)."""
    version = Version(commit, date, inputs=frozen_marks(text))
    section = None
    for line in text.splitlines():
        if heading := _SECTION.match(line):
            section = f"{heading.group(1)}/{heading.group(2)}"
        elif line.startswith("### ") or line.startswith("## "):
            section = None
        elif section and line.startswith("| `"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) >= 3 and cells[2]:
                word = cells[2].split()[0].strip("*")
                version.verdicts[f"{section} {cells[0].strip('`')}"] = word
    return version


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, check=True, capture_output=True, text=True).stdout


def versions(last: int, path: str = "RESULTS.md") -> list[Version]:
    """The last ``last`` committed versions of ``path``, oldest first."""
    log = _git("log", f"-{last}", "--format=%H %ad", "--date=short", "--", path).split("\n")
    out = []
    for line in reversed([entry for entry in log if entry.strip()]):
        commit, date = line.split()
        out.append(parse(_git("show", f"{commit}:{path}"), commit[:7], date))
    return out


#: the kinds of a paper's frozen inputs that decide what its runs train (``distrepro.claims.frozen``, slugged)
RECIPE_KINDS = ("paper.yaml", "arm-configs", "method-and-training-code")


def same_recipe(older: dict[str, str] | None, newer: dict[str, str] | None) -> bool:
    """Whether a paper's runs trained the same recipe in both versions: every recipe kind both marks carry is
    equal (a kind only the newer mark has was not recorded before), and both carry paper.yaml and arm configs."""
    if not older or not newer or any(k not in older or k not in newer for k in RECIPE_KINDS[:2]):
        return False
    return all(older[k] == newer[k] for k in RECIPE_KINDS if k in older and k in newer)


@dataclass
class PairSummary:
    """Rows two versions share, by whether the row's paper trained the same recipe in both."""

    older: str
    newer: str
    kept: Counter[bool] = field(default_factory=Counter)  # same recipe? -> rows keeping their verdict
    rows: Counter[bool] = field(default_factory=Counter)  # same recipe? -> rows compared
    flips: list[str] = field(default_factory=list)  # PASS <-> FAIL, with the row


def compare(older: Version, newer: Version) -> PairSummary:
    summary = PairSummary(older.commit, newer.commit)
    for row, verdict in newer.verdicts.items():
        if row not in older.verdicts:
            continue
        paper = row.split("/")[0]
        same = same_recipe(older.inputs.get(paper), newer.inputs.get(paper))
        summary.rows[same] += 1
        summary.kept[same] += older.verdicts[row] == verdict
        if {older.verdicts[row], verdict} == {"PASS", "FAIL"}:
            summary.flips.append(f"{row}: {older.verdicts[row]} → {verdict}")
    return summary


def report(history: list[Version], rows: bool) -> str:
    lines = ["| versions | rows compared | kept their verdict | of them, same recipe: kept / compared | PASS ↔ FAIL |"]
    lines.append("|---|---:|---:|---:|---|")
    total_kept = total_rows = 0
    for older, newer in pairwise(history):
        s = compare(older, newer)
        compared, kept = sum(s.rows.values()), sum(s.kept.values())
        total_kept, total_rows = total_kept + kept, total_rows + compared
        flips = "; ".join(s.flips) or "none"
        lines.append(
            f"| {older.commit} ({older.date}) → {newer.commit} ({newer.date}) | {compared} | {kept} "
            f"({kept / max(compared, 1):.0%}) | {s.kept[True]} / {s.rows[True]} | {flips} |"
        )
    lines.append(f"\nOver {len(history) - 1} consecutive pairs: {total_kept} of {total_rows} rows kept their verdict.")
    if rows:
        lines.append("\n| row | " + " | ".join(v.commit for v in history) + " |")
        lines.append("|---|" + "---|" * len(history))
        for row in sorted({r for v in history for r in v.verdicts}):
            seq = [_SHORT.get(v.verdicts.get(row, ""), v.verdicts.get(row, "–")) for v in history]
            if len(set(seq)) > 1:
                lines.append(f"| {row} | " + " | ".join(seq) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--last", type=int, default=6, help="versions of RESULTS.md to read (default 6)")
    parser.add_argument("--rows", action="store_true", help="also print each row whose verdict ever moved")
    args = parser.parse_args(argv)
    if args.last < 2:
        parser.error("--last needs at least 2 versions to compare")
    print(report(versions(args.last), args.rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
